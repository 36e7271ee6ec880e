// Package web holds the console's browser assets: the templ templates (in
// templates/) and the static files (in static/), embedded into the server
// binary so that running it needs no build step and no files on disk.
package web

import "embed"

// Static holds static/: the console's CSS and scripts, and the vendored
// htmx, htmx-ext-ws and Pico CSS (see static/VENDOR.md).
//
//go:embed static
var Static embed.FS
