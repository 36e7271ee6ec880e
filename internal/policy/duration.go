package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Duration is a time.Duration written as a Go duration string in JSON and
// YAML ("90s", "15m"). It is written back in compact form: "15m", "1h30m",
// "1m30s". Range checks happen in Compile, not while decoding.
type Duration time.Duration

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// String formats d compactly: time.Duration's format without trailing zero
// units ("15m" rather than "15m0s", "1h" rather than "1h0m0s").
func (d Duration) String() string {
	s := time.Duration(d).String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// MarshalJSON writes d as a compact duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(d.String())
}

// UnmarshalJSON reads a Go duration string; numbers and other JSON types are
// rejected so that "timeout": 900 cannot be mistaken for seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New(`duration must be a string such as "90s" or "15m"`)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %q: want a Go duration such as \"90s\" or \"15m\"", s)
	}
	*d = Duration(v)
	return nil
}
