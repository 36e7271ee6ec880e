package risk

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits that keep a scan of arbitrary arguments bounded.
const (
	// maxDepth is how deep into nested maps and slices the scan goes.
	maxDepth = 32
	// maxScanBytes is how many bytes of strings (values and map keys) one
	// scan reads.
	maxScanBytes = 1 << 20
	// maxNodes is how many values one scan visits; with maxDepth it bounds
	// work on self-referencing structures built in code.
	maxNodes = 1 << 18
)

// visitor receives what a walker finds.
type visitor interface {
	// visitString gets every string value, and every map key (mapKey true),
	// already cut to the remaining byte budget. key is the normalised name
	// of the nearest enclosing map key ("" at the top).
	visitString(w *walker, s, key string, mapKey bool)
	// visitEntry gets every map entry before its value is walked.
	// hasCurrency tells whether the map also has a "currency" key.
	visitEntry(w *walker, key string, v any, hasCurrency bool)
	// visitList gets every list before its elements are walked.
	visitList(w *walker, l list, key string)
}

// list is a read-only view of []any or []string.
type list struct {
	anys []any
	strs []string
}

func (l list) len() int {
	if l.strs != nil {
		return len(l.strs)
	}
	return len(l.anys)
}

// str returns element i if it is a string.
func (l list) str(i int) (string, bool) {
	if l.strs != nil {
		return l.strs[i], true
	}
	s, ok := l.anys[i].(string)
	return s, ok
}

// pathSeg is one step from the args root: a map key or a list index.
type pathSeg struct {
	key string
	idx int // -1 for a map key
}

// walker visits every string in a decoded JSON value depth-first, in a
// deterministic order (map keys sorted), within the scan limits. Values of
// types encoding/json does not produce are skipped, apart from a few common
// typed containers ([]string, map[string]string, []map[string]any).
type walker struct {
	budget   int
	nodes    int
	depthHit bool // something lay deeper than maxDepth
	bytesHit bool // strings exceeded maxScanBytes
	nodesHit bool // values exceeded maxNodes
	stop     bool // the visitor has seen enough
	path     []pathSeg
}

func newWalker() walker {
	return walker{budget: maxScanBytes, path: make([]pathSeg, 0, 8)}
}

// limited reports whether part of the input was not scanned.
func (w *walker) limited() bool { return w.depthHit || w.bytesHit || w.nodesHit }

// walkArgs walks the top-level argument map.
func (w *walker) walkArgs(v visitor, args map[string]any) {
	if args != nil {
		w.walk(v, args, 0, "")
	}
}

func (w *walker) walk(v visitor, val any, depth int, key string) {
	if w.stop {
		return
	}
	if depth > maxDepth {
		w.depthHit = true
		return
	}
	w.nodes++
	if w.nodes > maxNodes {
		w.nodesHit, w.stop = true, true
		return
	}
	switch t := val.(type) {
	case string:
		if s, ok := w.take(t); ok {
			v.visitString(w, s, key, false)
		}
	case map[string]any:
		keys := sortedKeys(t)
		hasCur := hasCurrencyKey(keys)
		for _, k := range keys {
			if w.stop {
				return
			}
			w.entry(v, k, t[k], depth, hasCur)
		}
	case map[string]string:
		keys := sortedKeys(t)
		hasCur := hasCurrencyKey(keys)
		for _, k := range keys {
			if w.stop {
				return
			}
			w.entry(v, k, t[k], depth, hasCur)
		}
	case []any:
		v.visitList(w, list{anys: t}, key)
		for i, e := range t {
			if w.stop {
				return
			}
			w.path = append(w.path, pathSeg{idx: i})
			w.walk(v, e, depth+1, key)
			w.path = w.path[:len(w.path)-1]
		}
	case []string:
		v.visitList(w, list{strs: t}, key)
		for i, e := range t {
			if w.stop {
				return
			}
			w.path = append(w.path, pathSeg{idx: i})
			w.walk(v, e, depth+1, key)
			w.path = w.path[:len(w.path)-1]
		}
	case []map[string]any:
		for i, e := range t {
			if w.stop {
				return
			}
			w.path = append(w.path, pathSeg{idx: i})
			w.walk(v, e, depth+1, key)
			w.path = w.path[:len(w.path)-1]
		}
	}
}

// entry visits one map entry: its key as a string, then the entry, then the
// value one level down.
func (w *walker) entry(v visitor, k string, val any, depth int, hasCur bool) {
	w.path = append(w.path, pathSeg{key: k, idx: -1})
	nk := keyName(k)
	if s, ok := w.take(k); ok {
		v.visitString(w, s, nk, true)
	}
	if !w.stop {
		v.visitEntry(w, nk, val, hasCur)
		w.walk(v, val, depth+1, nk)
	}
	w.path = w.path[:len(w.path)-1]
}

// take charges s against the byte budget and returns the part that may be
// scanned.
func (w *walker) take(s string) (string, bool) {
	if s == "" {
		return "", false
	}
	if w.budget <= 0 {
		w.bytesHit = true
		return "", false
	}
	if len(s) > w.budget {
		s = truncateUTF8(s, w.budget)
		w.bytesHit = true
		w.budget = 0
		return s, s != ""
	}
	w.budget -= len(s)
	return s, true
}

// pathString renders the current position as args.a.b[2]["odd key"].
func (w *walker) pathString() string {
	var b strings.Builder
	b.WriteString("args")
	for _, p := range w.path {
		if p.idx >= 0 {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(p.idx))
			b.WriteByte(']')
			continue
		}
		k := p.key
		if isIdentKey(k) {
			b.WriteByte('.')
			b.WriteString(k)
			continue
		}
		if len(k) > 40 {
			k = truncateUTF8(k, 40) + "…"
		}
		b.WriteByte('[')
		b.WriteString(strconv.Quote(k))
		b.WriteByte(']')
	}
	return b.String()
}

func isIdentKey(k string) bool {
	if k == "" || len(k) > 40 {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(isWordByte(c) || c == '-') {
			return false
		}
	}
	return true
}

// keyName normalises a map key for lookups: lowercase, '-' as '_'.
func keyName(k string) string {
	if len(k) > 64 || !utf8.ValidString(k) {
		return ""
	}
	return strings.ReplaceAll(strings.ToLower(k), "-", "_")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func hasCurrencyKey(keys []string) bool {
	for _, k := range keys {
		if strings.EqualFold(k, "currency") {
			return true
		}
	}
	return false
}
