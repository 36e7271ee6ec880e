package benchtable

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// Result is one judged figure: a line of a results file.
type Result struct {
	// Row and Metric name the table row and the figure.
	Row    string `json:"row"`
	Metric string `json:"metric"`
	// Value is the measured figure, in Unit.
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	// Target is the metric's target in words; Pass whether Value meets it.
	Target string `json:"target"`
	Pass   bool   `json:"pass"`
	// Scale is what the figure was measured at (events, connections, ...),
	// 0 when its metric states none; AtScale whether that is at least the
	// scale the target is stated at.
	Scale     int64  `json:"scale,omitempty"`
	ScaleUnit string `json:"scale_unit,omitempty"`
	AtScale   bool   `json:"at_scale"`
	// Detail is context for a reader ("3,100 vs 5,170 tx/s").
	Detail string `json:"detail,omitempty"`
	// At is when the figure was measured.
	At time.Time `json:"at"`
}

// Measure judges value against metric id's target. scale is what it was
// measured at (ignored when the metric states no scale).
func Measure(id string, value float64, scale int64, detail string) (Result, error) {
	row, m, ok := metric(id)
	if !ok {
		return Result{}, fmt.Errorf("benchtable: no metric %q", id)
	}
	r := Result{Row: row.ID, Metric: m.ID, Value: value, Unit: m.Unit, Target: m.Target(), Pass: m.pass(value),
		AtScale: true, Detail: detail, At: time.Now().UTC()}
	if m.MinScale > 0 {
		r.Scale, r.ScaleUnit, r.AtScale = scale, m.ScaleUnit, scale >= m.MinScale
	}
	return r, nil
}

// Recorder collects a benchmark's results and appends them to a file; its
// zero value and a Recorder for path "" record nothing.
type Recorder struct {
	path    string
	results []Result
	err     error
}

// NewRecorder returns a Recorder appending to path ("" for none).
func NewRecorder(path string) *Recorder { return &Recorder{path: path} }

// Add measures a figure (see [Measure]) and keeps it for [Recorder.Flush].
// An unknown metric is remembered as Flush's error.
func (rec *Recorder) Add(id string, value float64, scale int64, detail string) {
	r, err := Measure(id, value, scale, detail)
	if err != nil {
		rec.err = errors.Join(rec.err, err)
		return
	}
	rec.results = append(rec.results, r)
}

// Flush appends the kept results to the file, one JSON object a line.
func (rec *Recorder) Flush() error {
	if rec.err != nil {
		return rec.err
	}
	if rec.path == "" || len(rec.results) == 0 {
		return nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for _, r := range rec.results {
		if err := enc.Encode(r); err != nil {
			return fmt.Errorf("benchtable: encoding %s: %w", r.Metric, err)
		}
	}
	f, err := os.OpenFile(rec.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("benchtable: opening results: %w", err)
	}
	if _, err := f.Write(buf.Bytes()); err != nil {
		f.Close()
		return fmt.Errorf("benchtable: writing results: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("benchtable: writing results: %w", err)
	}
	rec.results = nil
	return nil
}

// Read parses a results file. Blank lines are skipped; a line that is not
// a result is an error naming it.
func Read(r io.Reader) ([]Result, error) {
	var out []Result
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var res Result
		if err := json.Unmarshal(line, &res); err != nil {
			return nil, fmt.Errorf("benchtable: line %d: %w", n, err)
		}
		if res.Metric == "" {
			return nil, fmt.Errorf("benchtable: line %d: no metric", n)
		}
		out = append(out, res)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("benchtable: reading results: %w", err)
	}
	return out, nil
}
