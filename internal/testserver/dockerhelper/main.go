// Command dockerhelper runs one server in a container with
// testcontainers-go, for golocker's tests on machines that have Docker but
// not the server's binary.
//
// It lives in a module of its own so that testcontainers-go and Docker's
// client stay out of the go.mod of every driver, and so out of the module
// graph of golocker's users. internal/testserver builds it on first use
// (testserver.StartContainer) and caches the binary; nothing else should
// need to run it by hand:
//
//	dockerhelper -image redis:7.0 -port 6379/tcp -wait-log 'Ready to accept connections' -- redis-server --save ''
//
// Once the server is ready it prints "addr HOST:PORT" on standard output,
// where HOST:PORT reaches the published port. It removes the container
// when its standard input closes: when the test's cleanup closes it, or
// when the test binary dies. On failure it prints the error on standard
// error and exits with status 1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

const (
	startTimeout = 3 * time.Minute
	waitTimeout  = 2 * time.Minute
	stopTimeout  = 5 * time.Second
)

// envFlag collects repeated -env KEY=VALUE flags.
type envFlag map[string]string

func (e envFlag) String() string { return fmt.Sprint(map[string]string(e)) }

func (e envFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q is not KEY=VALUE", v)
	}
	e[k] = val
	return nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "dockerhelper:", err)
		os.Exit(1)
	}
}

func run() error {
	image := flag.String("image", "", "the image to run")
	port := flag.String("port", "", "the container port to publish, e.g. 6379/tcp")
	waitLog := flag.String("wait-log", "", "a log line that says the server is ready")
	occurrence := flag.Int("wait-occurrence", 1, "how many times -wait-log must appear")
	env := envFlag{}
	flag.Var(env, "env", "KEY=VALUE for the container's environment (repeatable)")
	flag.Parse()
	if *image == "" || *port == "" {
		return errors.New("-image and -port are required")
	}

	strategies := []wait.Strategy{wait.ForListeningPort(*port)}
	if *waitLog != "" {
		strategies = append(strategies, wait.ForLog(*waitLog).WithOccurrence(*occurrence))
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image:        *image,
			ExposedPorts: []string{*port},
			Env:          env,
			Cmd:          flag.Args(),
			WaitingFor:   wait.ForAll(strategies...).WithDeadline(waitTimeout),
		},
		Started: true,
	})
	if c != nil {
		defer func() {
			if err := testcontainers.TerminateContainer(c, testcontainers.StopTimeout(stopTimeout)); err != nil {
				fmt.Fprintf(os.Stderr, "dockerhelper: removing container %s: %v\n", *image, err)
			}
		}()
	}
	if err != nil {
		return fmt.Errorf("starting container %s: %w", *image, err)
	}
	addr, err := c.PortEndpoint(ctx, *port, "")
	if err != nil {
		return fmt.Errorf("container %s: %w", *image, err)
	}
	fmt.Printf("addr %s\n", addr)

	// Serve until standard input closes or a signal asks us to stop; the
	// deferred call removes the container either way.
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(done)
	}()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-done:
	case <-sigs:
	}
	return nil
}
