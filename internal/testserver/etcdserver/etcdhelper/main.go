// Command etcdhelper runs one etcd member through etcd's embed package, so
// that the tests of golocker can start, kill and pause etcd members as real
// processes without an etcd binary installed. Package
// internal/testserver/etcdserver builds and starts it; it is not meant to be
// run by hand.
//
// Usage:
//
//	etcdhelper --config-file etcd.yaml
//
// The configuration file has the format of etcd's own --config-file, so
// etcdserver starts a real etcd binary with the same file.
//
// It lives in a module of its own so that etcd's server packages, and all
// they import, stay out of the go.mod of etcdlock and of every other
// module of golocker.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "etcdhelper:", err)
		os.Exit(1)
	}
}

func run() error {
	configFile := flag.String("config-file", "", "etcd YAML configuration file")
	flag.Parse()
	if *configFile == "" {
		return fmt.Errorf("--config-file is required")
	}
	cfg, err := embed.ConfigFromFile(*configFile)
	if err != nil {
		return err
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	defer e.Close()

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-e.Server.ReadyNotify():
		fmt.Fprintln(os.Stderr, "etcdhelper: ready to serve client requests")
	case err := <-e.Err():
		return err
	case s := <-sigs:
		return fmt.Errorf("stopped by %v before being ready", s)
	case <-time.After(5 * time.Minute):
		return fmt.Errorf("not ready after 5 minutes")
	}
	select {
	case err := <-e.Err():
		return err
	case <-sigs:
		return nil
	}
}
