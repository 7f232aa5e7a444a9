package testserver

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// EnvDocker, set to 0 or false, keeps this package from using Docker even
// when a daemon answers.
const EnvDocker = "LOCKER_TEST_DOCKER"

// Images used when a server is started in a container.
const (
	RedisImage     = "redis:7.0"
	EtcdImage      = "gcr.io/etcd-development/etcd:v3.6.16"
	ZooKeeperImage = "zookeeper:3.8"
)

const dockerPingTimeout = 3 * time.Second

var dockerOnce = sync.OnceValue(dockerPing)

// DockerAvailable reports whether a Docker daemon answers a ping within a
// few seconds, so that testcontainers-go can start servers. The answer is
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

// containerSpec is what startContainer needs to run one server.
type containerSpec struct {
	image string
	port  string // the container port to publish, e.g. "6379/tcp"
	env   map[string]string
	cmd   []string
	wait  wait.Strategy
}

// startContainer runs a container and returns the host:port at which its
// published port is reached. A cleanup removes the container.
func startContainer(t TB, spec containerSpec) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image:        spec.image,
			ExposedPorts: []string{spec.port},
			Env:          spec.env,
			Cmd:          spec.cmd,
			WaitingFor:   wait.ForAll(wait.ForListeningPort(spec.port), spec.wait).WithDeadline(2 * time.Minute),
		},
		Started: true,
	})
	if c != nil {
		t.Cleanup(func() {
			if err := testcontainers.TerminateContainer(c, testcontainers.StopTimeout(5*time.Second)); err != nil {
				t.Logf("testserver: removing container %s: %v", spec.image, err)
			}
		})
	}
	if err != nil {
		t.Fatalf("testserver: starting container %s: %v", spec.image, err)
		return ""
	}
	addr, err := c.PortEndpoint(ctx, spec.port, "")
	if err != nil {
		t.Fatalf("testserver: container %s: %v", spec.image, err)
		return ""
	}
	return addr
}

func redisContainer(t TB) *RedisServer {
	t.Helper()
	addr := startContainer(t, containerSpec{
		image: RedisImage,
		port:  "6379/tcp",
		cmd:   []string{"redis-server", "--save", "", "--appendonly", "no"},
		wait:  wait.ForLog("Ready to accept connections"),
	})
	return &RedisServer{Addr: addr}
}

func etcdContainer(t TB) *EtcdServer {
	t.Helper()
	addr := startContainer(t, containerSpec{
		image: EtcdImage,
		port:  "2379/tcp",
		cmd: []string{"/usr/local/bin/etcd",
			"--data-dir", "/tmp/etcd",
			"--listen-client-urls", "http://0.0.0.0:2379",
			"--advertise-client-urls", "http://127.0.0.1:2379",
		},
		wait: wait.ForLog("ready to serve client requests"),
	})
	return &EtcdServer{Endpoints: []string{addr}}
}

func zooKeeperContainer(t TB) *ZooKeeperServer {
	t.Helper()
	addr := startContainer(t, containerSpec{
		image: ZooKeeperImage,
		port:  "2181/tcp",
		env: map[string]string{
			"ZOO_TICK_TIME":              "200",
			"ZOO_4LW_COMMANDS_WHITELIST": "srvr,mntr,ruok",
			"ZOO_ADMINSERVER_ENABLED":    "false",
		},
		wait: wait.ForLog("binding to port"),
	})
	return &ZooKeeperServer{Addrs: []string{addr}}
}
