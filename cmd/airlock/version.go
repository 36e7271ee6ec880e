package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is set at build time: go build -ldflags "-X main.version=v1.2.3".
var version = ""

type versionCmd struct{}

// Run prints the version.
func (c *versionCmd) Run(g *globals) error {
	v := binaryVersion()
	if g.json() {
		return printJSON(g.stdout, map[string]string{"version": v, "go": runtime.Version()})
	}
	fmt.Fprintf(g.stdout, "airlock %s (%s)\n", v, runtime.Version())
	return nil
}

// binaryVersion is the version set at build time, else the module's,
// else "devel".
func binaryVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}
