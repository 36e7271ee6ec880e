// Package migrations embeds Airlock's goose SQL migrations so the server
// applies them at start without files on disk.
package migrations

import "embed"

// FS holds every *.sql migration, applied in file-name order by goose.
//
//go:embed *.sql
var FS embed.FS
