package web

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"

	assets "github.com/airlockhq/airlock/web"
)

// staticFiles serves web/static from the binary, with an ETag per file so
// browsers revalidate cheaply instead of downloading again.
type staticFiles struct {
	files map[string]staticFile
}

type staticFile struct {
	data []byte
	etag string
}

func mustStatic() *staticFiles {
	s := &staticFiles{files: map[string]staticFile{}}
	err := fs.WalkDir(assets.Static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(assets.Static, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		s.files["/"+p] = staticFile{data: data, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		panic("web: reading embedded static files: " + err.Error())
	}
	return s
}

// ServeHTTP serves GET /static/<file>.
func (s *staticFiles) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f, ok := s.files[path.Clean(r.URL.Path)]
	if !ok || strings.HasSuffix(r.URL.Path, "/") {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("ETag", f.etag)
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, path.Base(r.URL.Path), time.Time{}, bytes.NewReader(f.data))
}
