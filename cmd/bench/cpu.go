package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuMeter reads the CPU time this process (server and benchmark client)
// and the embedded cluster's processes have used: per operation it is a
// figure that a busy machine disturbs much less than throughput.
type cpuMeter struct {
	postmaster int // pid; 0 when unknown
}

// newCPUMeter finds the cluster's postmaster under dataDir.
func newCPUMeter(dataDir string) cpuMeter {
	b, err := os.ReadFile(filepath.Join(dataDir, "pg", "data", "postmaster.pid"))
	if err != nil {
		return cpuMeter{}
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	return cpuMeter{postmaster: pid}
}

// sample is CPU used so far: by this process and by the cluster.
type cpuSample struct{ self, pg time.Duration }

func (m cpuMeter) now() cpuSample {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	s := cpuSample{self: time.Duration(ru.Utime.Nano() + ru.Stime.Nano())}
	if m.postmaster == 0 {
		return s
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, cpu, ok := procStat(pid)
		if ok && (pid == m.postmaster || ppid == m.postmaster) {
			s.pg += cpu
		}
	}
	return s
}

// procStat returns a process's parent and CPU time from /proc/PID/stat.
func procStat(pid int) (int, time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// The command may hold spaces: fields start after its closing paren.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0, 0, false
	}
	ppid, _ := strconv.Atoi(f[1])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	return ppid, time.Duration(ut+st) * tick, true
}

func (s cpuSample) sub(o cpuSample) cpuSample {
	return cpuSample{self: s.self - o.self, pg: s.pg - o.pg}
}

// phase runs one benchmark phase and records the CPU it used.
func (m cpuMeter) phase(run func() result) result {
	before := m.now()
	r := run()
	r.cpu = m.now().sub(before)
	return r
}
