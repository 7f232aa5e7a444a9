package testserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// EnvDocker, set to 0 or false, keeps this package from using Docker even
// when a daemon answers.
const EnvDocker = "LOCKER_TEST_DOCKER"

const dockerPingTimeout = 3 * time.Second

var dockerOnce = sync.OnceValue(dockerPing)

// DockerAvailable reports whether a Docker daemon answers a ping within a
// few seconds, so that StartContainer can start servers. The answer is
// computed once per test binary. A docker CLI without a daemon, a missing
// socket or a daemon that does not answer in time all count as
// unavailable.
func DockerAvailable() bool {
	switch strings.ToLower(EnvAddr(EnvDocker)) {
	case "0", "false", "no":
		return false
	}
	return dockerOnce()
}

// dockerPing sends GET /_ping to the daemon named by DOCKER_HOST (default
// the unix socket /var/run/docker.sock).
func dockerPing() bool {
	host := EnvAddr("DOCKER_HOST")
	if host == "" {
		host = "unix:///var/run/docker.sock"
	}
	u, err := url.Parse(host)
	if err != nil {
		return false
	}
	var network, addr string
	switch u.Scheme {
	case "unix":
		if _, err := os.Stat(u.Path); err != nil {
			return false
		}
		network, addr = "unix", u.Path
	case "tcp":
		network, addr = "tcp", u.Host
	default:
		return false // ssh:// and npipe:// are not probed
	}
	tr := &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), dockerPingTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker/_ping", nil)
	if err != nil {
		return false
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// ContainerSpec describes a server to run in a container with
// StartContainer.
type ContainerSpec struct {
	Image string            // the image, e.g. "redis:7.0"
	Port  string            // the container port to publish, e.g. "6379/tcp"
	Env   map[string]string // environment variables of the container
	Cmd   []string          // the command, instead of the image's own
	// WaitLog is a line of the container's log that says the server is
	// ready, once it has appeared WaitOccurrence times (default once).
	// The published port must accept connections too.
	WaitLog        string
	WaitOccurrence int
}

const (
	// containerStartTimeout bounds the image's pull and the server's
	// start, once the helper is built.
	containerStartTimeout = 3 * time.Minute
	// containerStopTimeout bounds the removal of a container.
	containerStopTimeout = 30 * time.Second
)

// StartContainer runs a container and returns the host:port at which its
// published port is reached; a cleanup removes the container. Call it only
// when DockerAvailable reports true.
//
// The container is started by the dockerhelper command, a module of its
// own around testcontainers-go in the directory dockerhelper next to this
// file, built on first use (see BuildHelper). The helper prints the
// address once the server is ready and removes the container when its
// standard input closes, which is also what happens if the test binary
// dies.
func StartContainer(t TB, spec ContainerSpec) string {
	t.Helper()
	src, err := HelperSource("dockerhelper")
	if err != nil {
		t.Fatalf("testserver: starting container %s: %v", spec.Image, err)
		return ""
	}
	bin, took, err := BuildHelper("dockerhelper", src)
	if err != nil {
		t.Fatalf("testserver: starting container %s: building the Docker helper: %v", spec.Image, err)
		return ""
	}
	if took > 0 {
		t.Logf("testserver: built the Docker helper %s in %v", bin, took.Round(time.Millisecond))
	}
	logPath := filepath.Join(t.TempDir(), "dockerhelper.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("testserver: %v", err)
		return ""
	}
	cmd := exec.Command(bin, containerArgs(spec)...)
	cmd.Stderr = logFile
	stdin, err1 := cmd.StdinPipe()
	stdout, err2 := cmd.StdoutPipe()
	if err := errors.Join(err1, err2); err != nil {
		logFile.Close()
		t.Fatalf("testserver: %v", err)
		return ""
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("testserver: starting container %s: %v", spec.Image, err)
		return ""
	}
	exited := make(chan error, 1)
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- strings.TrimSpace(line)
		_, _ = io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
		logFile.Close()
	}()
	t.Cleanup(func() {
		stdin.Close() // the helper removes the container and exits
		select {
		case err := <-exited:
			if err != nil {
				t.Logf("testserver: removing container %s: %v; log %s ends:\n%s", spec.Image, err, logPath, tailFile(logPath))
			}
		case <-time.After(containerStopTimeout):
			_ = cmd.Process.Kill()
			t.Logf("testserver: the Docker helper did not remove container %s within %v; log %s ends:\n%s",
				spec.Image, containerStopTimeout, logPath, tailFile(logPath))
		}
	})
	select {
	case line := <-lines:
		if addr, ok := strings.CutPrefix(line, "addr "); ok {
			return addr
		}
		t.Fatalf("testserver: starting container %s failed; log %s ends:\n%s", spec.Image, logPath, tailFile(logPath))
	case <-time.After(containerStartTimeout):
		t.Fatalf("testserver: container %s not ready after %v; log %s ends:\n%s", spec.Image, containerStartTimeout, logPath, tailFile(logPath))
	}
	return ""
}

// containerArgs turns spec into the dockerhelper's command line.
func containerArgs(spec ContainerSpec) []string {
	args := []string{"-image", spec.Image, "-port", spec.Port}
	keys := make([]string, 0, len(spec.Env))
	for k := range spec.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "-env", k+"="+spec.Env[k])
	}
	if spec.WaitLog != "" {
		n := max(spec.WaitOccurrence, 1)
		args = append(args, "-wait-log", spec.WaitLog, "-wait-occurrence", strconv.Itoa(n))
	}
	return append(append(args, "--"), spec.Cmd...)
}

// tailFile returns the last lines of the file at path.
func tailFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	return Tail(string(b), logTailLines)
}
