package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of the CPU times in /proc/<pid>/stat: USER_HZ, 100 on
// every architecture Go runs Linux on.
const userHZ = 100

// usage is what a process has used so far: CPU time (user plus system)
// and minor page faults, each a fault on memory the process had not touched
// yet or had given back. A server that keeps taking fresh memory (a
// growing heap, a growing page cache behind its writes) pays for it here.
type usage struct {
	CPU         time.Duration
	MinorFaults int64
}

func (u usage) sub(v usage) usage {
	return usage{CPU: u.CPU - v.CPU, MinorFaults: u.MinorFaults - v.MinorFaults}
}

// processUsage returns what process pid has used, read from /proc (Linux
// only).
func processUsage(pid int) (usage, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return usage{}, fmt.Errorf("read the CPU time and page faults of process %d: %w", pid, err)
	}
	return parseProcStat(string(raw))
}

// parseProcStat reads minflt, utime and stime, fields 10, 14 and 15 of a
// /proc/<pid>/stat line. The command name, field 2, is in parentheses and
// may contain spaces and parentheses itself, so fields are counted from
// its last ')'.
func parseProcStat(stat string) (usage, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return usage{}, fmt.Errorf("unexpected /proc stat line %q", stat)
	}
	// After ')': state is field 3, so minflt (10) is the 8th field here,
	// utime (14) and stime (15) the 12th and 13th.
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return usage{}, fmt.Errorf("unexpected /proc stat line %q", stat)
	}
	var n [3]int64
	for j, s := range []string{f[7], f[11], f[12]} {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return usage{}, fmt.Errorf("unexpected /proc stat line %q: %w", stat, err)
		}
		n[j] = v
	}
	return usage{CPU: time.Duration(n[1]+n[2]) * time.Second / userHZ, MinorFaults: n[0]}, nil
}

// usageWindow samples what the processes pids have used at from and at to,
// and returns what each used in between. It returns early, with an error,
// if ctx ends first.
func usageWindow(ctx context.Context, pids []int, from, to time.Time) ([]usage, error) {
	sample := func() ([]usage, error) {
		out := make([]usage, len(pids))
		for i, pid := range pids {
			d, err := processUsage(pid)
			if err != nil {
				return nil, err
			}
			out[i] = d
		}
		return out, nil
	}
	wait := func(at time.Time) error {
		t := time.NewTimer(time.Until(at))
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := wait(from); err != nil {
		return nil, err
	}
	start, err := sample()
	if err != nil {
		return nil, err
	}
	if err := wait(to); err != nil {
		return nil, err
	}
	end, err := sample()
	if err != nil {
		return nil, err
	}
	for i := range end {
		end[i] = end[i].sub(start[i])
	}
	return end, nil
}
