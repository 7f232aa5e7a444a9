// Command etcdserver runs one etcd member through etcd's embed package, so
// that the tests of golocker can start, kill and pause etcd members as real
// processes without an etcd binary installed. internal/testserver builds and
// starts it; it is not meant to be run by hand.
//
// Usage:
//
//	etcdserver --config-file etcd.yaml
//
// The configuration file has the format of etcd's own --config-file, so
// internal/testserver starts a real etcd binary with the same file.
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
		fmt.Fprintln(os.Stderr, "etcdserver:", err)
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
		fmt.Fprintln(os.Stderr, "etcdserver: ready to serve client requests")
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
