package testserver

// Process inspection through /proc for the fault hooks of the SQL and
// MongoDB servers (packages sqlserver and mongoserver): waiting until a
// paused server has really stopped, and reaching children that left the
// server's process group.

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ChildPIDs returns the live direct children of pid, read from /proc.
func ChildPIDs(pid int) []int {
	if pid <= 0 {
		return nil
	}
	return liveProcs(func(_ int, st procStat) bool { return st.ppid == pid })
}

// liveProcs returns the pids of the processes in /proc, neither zombie nor
// dead, for which keep returns true.
func liveProcs(keep func(pid int, st procStat) bool) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readProcStat(pid); ok && st.state != "Z" && st.state != "X" && keep(pid, st) {
			out = append(out, pid)
		}
	}
	return out
}

// procStat is the start of /proc/PID/stat: state, parent and process
// group.
type procStat struct {
	state      string
	ppid, pgrp int
}

// readProcStat reads /proc/PID/stat, whose command name may hold spaces
// and parentheses.
func readProcStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 3 {
		return procStat{}, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgrp, err2 := strconv.Atoi(f[2])
	return procStat{state: f[0], ppid: ppid, pgrp: pgrp}, err1 == nil && err2 == nil
}

// ProcStat returns the state and parent pid of a process from
// /proc/PID/stat.
func ProcStat(pid int) (state string, ppid int, ok bool) {
	st, ok := readProcStat(pid)
	return st.state, st.ppid, ok
}

// SignalAll sends sig to each of pids, ignoring errors (a pid may be gone).
func SignalAll(pids []int, sig syscall.Signal) {
	for _, pid := range pids {
		_ = syscall.Kill(pid, sig)
	}
}

// WaitGone waits until none of pids is alive (zombies count as gone),
// polling /proc for at most timeout.
func WaitGone(pids []int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var left []int
		for _, pid := range pids {
			if state, _, ok := ProcStat(pid); ok && state != "Z" && state != "X" {
				left = append(left, pid)
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v still alive %v after SIGKILL", left, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitStopped waits until every thread of every one of pids is stopped:
// kill(2) returns before a running thread has taken SIGSTOP, and until it
// has, the server can still answer.
func WaitStopped(pids []int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		running := 0
		for _, pid := range pids {
			tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
			for _, task := range tasks {
				tid, err := strconv.Atoi(task.Name())
				if err != nil {
					continue
				}
				b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(tid) + "/stat")
				if err != nil {
					continue // the thread exited
				}
				s := string(b)
				if f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]); len(f) > 0 && f[0] != "T" && f[0] != "t" && f[0] != "Z" && f[0] != "X" {
					running++
				}
			}
		}
		if running == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d threads of pids %v not stopped %v after SIGSTOP", running, pids, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
