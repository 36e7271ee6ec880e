package mcpgateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// checkMessage refuses a message whose meaning could differ between the
// gateway and the upstream: invalid UTF-8 (Go reads it as U+FFFD), and
// an object with a key twice, also in another case (Go's decoder takes the
// last key of any case, JavaScript's the last of the exact case: with
// {"name":"delete-repo","Name":"echo"} the gate would see one tool and
// the upstream run another).
func checkMessage(body []byte) error {
	if !utf8.Valid(body) {
		return errors.New("the message is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	type frame struct {
		object bool
		keys   map[string]bool
		key    bool // the next string token is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			if len(stack) > 0 {
				return errors.New("the message is not JSON: it ends early")
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("the message is not JSON: %w", err)
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				if top != nil && top.object {
					top.key = true
				}
				stack = append(stack, &frame{object: t == '{', keys: map[string]bool{}, key: t == '{'})
				if len(stack) > 64 {
					return errors.New("the message nests too deep")
				}
			default:
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].object {
					stack[len(stack)-1].key = true
				}
			}
		default:
			if top != nil && top.object {
				if top.key {
					k := strings.ToLower(tok.(string))
					if top.keys[k] {
						return fmt.Errorf("the message has the key %q twice (keys are compared case-insensitively)", tok)
					}
					top.keys[k] = true
					top.key = false
				} else {
					top.key = true
				}
			}
		}
	}
}
