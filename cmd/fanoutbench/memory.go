package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
)

// memory is the bench process's memory at one moment. The bench process
// holds the two server instances (and one agent's client); the reviewers'
// clients run in a child process, so growth here is the servers'.
type memory struct {
	rss int64 // resident set size, /proc/self/status VmRSS
	gom int64 // Go memory in use: live heap objects + goroutine stacks
}

// measureMemory collects garbage, returns freed pages to the OS and reads
// both figures.
func measureMemory() (memory, error) {
	runtime.GC()
	debug.FreeOSMemory()
	samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(samples)
	m := memory{gom: int64(samples[0].Value.Uint64() + samples[1].Value.Uint64())}
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return m, fmt.Errorf("reading RSS: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return m, fmt.Errorf("reading RSS: %q: %w", rest, err)
			}
			m.rss = kb << 10
			return m, nil
		}
	}
	return m, fmt.Errorf("reading RSS: no VmRSS in /proc/self/status")
}
