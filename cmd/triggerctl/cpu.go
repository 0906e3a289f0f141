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

// processCPU returns the CPU time (user plus system) process pid has used,
// read from /proc (Linux only).
func processCPU(pid int) (time.Duration, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("read the CPU time of process %d: %w", pid, err)
	}
	return parseProcStatCPU(string(raw))
}

// parseProcStatCPU reads utime and stime, fields 14 and 15 of a
// /proc/<pid>/stat line. The command name, field 2, is in parentheses and
// may contain spaces and parentheses itself, so fields are counted from
// its last ')'.
func parseProcStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected /proc stat line %q", stat)
	}
	// After ')': state is field 3, so utime (14) and stime (15) are the
	// 12th and 13th fields here.
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("unexpected /proc stat line %q", stat)
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("unexpected /proc stat line %q: %w", stat, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// cpuWindow samples the CPU time of the processes pids at from and at to,
// and returns what each used in between. It returns early, with an error,
// if ctx ends first.
func cpuWindow(ctx context.Context, pids []int, from, to time.Time) ([]time.Duration, error) {
	sample := func() ([]time.Duration, error) {
		out := make([]time.Duration, len(pids))
		for i, pid := range pids {
			d, err := processCPU(pid)
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
		end[i] -= start[i]
	}
	return end, nil
}
