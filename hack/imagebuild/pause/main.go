// Command pause is a pod sandbox's ("pause") container for the local e2e
// cluster (e2e/cluster), which has no registry to pull
// registry.k8s.io/pause from. Like Kubernetes' pause.c it sleeps until
// SIGINT or SIGTERM, then exits 0, and, should it be PID 1 of a pod that
// shares its PID namespace, reaps orphaned children.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const version = "3.10-shadowtune"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("pause.go", version)
		return
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "Warning: pause should be the first process")
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			fmt.Fprintf(os.Stderr, "Shutting down, got signal: %v\n", s)
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
