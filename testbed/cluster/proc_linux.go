package cluster

import "syscall"

// The server gets its own process group, so a Ctrl-C at a terminal reaches
// only the program that started it (which stops it in order), and dies with
// the thread that started it, so a test killed by its timeout leaves no
// server behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
