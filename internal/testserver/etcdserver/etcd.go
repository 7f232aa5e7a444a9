package etcdserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/golocker/locker/internal/testserver"
)

// Environment variables naming etcd servers the user already runs.
const (
	// EnvEtcdEndpoints names a single etcd (or any etcd cluster, used as
	// one server): "127.0.0.1:2379" or "127.0.0.1:2379,127.0.0.1:22379".
	EnvEtcdEndpoints = "LOCKER_TEST_ETCD_ENDPOINTS"
	// EnvEtcdClusterEndpoints names the members of a multi-member cluster:
	// "127.0.0.1:2379,127.0.0.1:22379,127.0.0.1:32379".
	EnvEtcdClusterEndpoints = "LOCKER_TEST_ETCD_CLUSTER_ENDPOINTS"
	// EnvEtcdBinary names an etcd binary to start instead of the helper
	// built from the etcdhelper module: "/usr/bin/etcd".
	EnvEtcdBinary = "LOCKER_TEST_ETCD_BINARY"
)

// EtcdImage is the image used when etcd is started in a container.
const EtcdImage = "gcr.io/etcd-development/etcd:v3.6.16"

// EtcdServer is an etcd cluster of one or more members.
type EtcdServer struct {
	// Endpoints are the client addresses (host:port) of the members, as
	// clientv3.Config.Endpoints takes them.
	Endpoints []string
	// Members are the members this package started; empty when an
	// environment variable or a container named the server.
	Members []*EtcdMember
}

// EtcdMember is one etcd member process.
type EtcdMember struct {
	Name       string              // member name, e.g. "etcd-2"
	ClientAddr string              // host:port of its client URL
	PeerAddr   string              // host:port of its peer URL
	Proc       *testserver.Process // the member's process
}

// Etcd returns a single-member etcd: the one named by
// LOCKER_TEST_ETCD_ENDPOINTS, else a member started on free loopback ports
// (see EtcdCluster for which binary), else a container.
func Etcd(t testserver.TB) *EtcdServer {
	t.Helper()
	if eps := testserver.EnvAddrs(EnvEtcdEndpoints); len(eps) > 0 {
		return envEtcd(t, EnvEtcdEndpoints, eps)
	}
	return startEtcd(t, 1)
}

// EtcdCluster returns a 3-member etcd cluster: the one named by
// LOCKER_TEST_ETCD_CLUSTER_ENDPOINTS, else three members started in
// parallel on free loopback ports. The members run the etcdhelper command
// (etcd's embed package, the client's version; a module of its own in the
// directory etcdhelper), built with the go command on first use and
// cached; else LOCKER_TEST_ETCD_BINARY or an etcd binary in PATH (Debian's
// etcd-server).
func EtcdCluster(t testserver.TB) *EtcdServer {
	t.Helper()
	if eps := testserver.EnvAddrs(EnvEtcdClusterEndpoints); len(eps) > 0 {
		return envEtcd(t, EnvEtcdClusterEndpoints, eps)
	}
	return startEtcd(t, 3)
}

func envEtcd(t testserver.TB, env string, eps []string) *EtcdServer {
	t.Helper()
	testserver.CheckEnvServers(t, env, eps)
	return &EtcdServer{Endpoints: eps}
}

func trimScheme(ep string) string {
	if _, rest, ok := strings.Cut(ep, "://"); ok {
		return rest
	}
	return ep
}

func startEtcd(t testserver.TB, n int) *EtcdServer {
	t.Helper()
	bin, err := etcdBinary()
	if bin == "" {
		if n == 1 && testserver.DockerAvailable() {
			return etcdContainer(t)
		}
		testserver.Unavailable(t, "no etcd: %v; install Go (to build the embed helper) or Debian package etcd-server, or set %s", err, EnvEtcdEndpoints)
		return nil
	}
	s := &EtcdServer{}
	var cluster []string
	for i := range n {
		m := &EtcdMember{
			Name:       fmt.Sprintf("etcd-%d", i+1),
			ClientAddr: fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t)),
			PeerAddr:   fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t)),
		}
		s.Members = append(s.Members, m)
		s.Endpoints = append(s.Endpoints, m.ClientAddr)
		cluster = append(cluster, m.Name+"=http://"+m.PeerAddr)
	}
	token := fmt.Sprintf("golocker-%d-%d", os.Getpid(), time.Now().UnixNano())
	specs := make([]testserver.ProcessSpec, n)
	for i, m := range s.Members {
		dir := t.TempDir()
		cfg := fmt.Sprintf(`name: %s
data-dir: %s
listen-client-urls: http://%s
advertise-client-urls: http://%s
listen-peer-urls: http://%s
initial-advertise-peer-urls: http://%s
initial-cluster: %s
initial-cluster-token: %s
initial-cluster-state: new
heartbeat-interval: 50
election-timeout: 500
unsafe-no-fsync: true
enable-grpc-gateway: true
logger: zap
log-level: error
log-outputs: [stderr]
`, m.Name, filepath.Join(dir, "data"), m.ClientAddr, m.ClientAddr, m.PeerAddr, m.PeerAddr,
			strings.Join(cluster, ","), token)
		cfgPath := filepath.Join(dir, "etcd.yaml")
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
			t.Fatalf("testserver: %v", err)
			return nil
		}
		addr := m.ClientAddr
		specs[i] = testserver.ProcessSpec{
			Name:         m.Name,
			Path:         bin,
			Args:         []string{"--config-file", cfgPath},
			Dir:          dir,
			Ready:        func(ctx context.Context) error { return etcdHealthy(ctx, addr) },
			ReadyTimeout: 60 * time.Second,
		}
	}
	for i, p := range testserver.StartProcesses(t, specs...) {
		s.Members[i].Proc = p
	}
	return s
}

var etcdBinaryOnce = sync.OnceValues(findEtcdBinary)

// etcdBinary returns the etcd binary to start, building the helper once per
// test binary, or "" and why there is none.
func etcdBinary() (string, error) { return etcdBinaryOnce() }

func findEtcdBinary() (string, error) {
	if p := testserver.EnvAddr(EnvEtcdBinary); p != "" {
		return p, nil
	}
	helper, buildErr := buildEtcdHelper()
	if buildErr == nil {
		return helper, nil
	}
	if p := testserver.LookPath([]string{"etcd"}, "/usr/bin", "/usr/local/bin"); p != "" {
		return p, nil
	}
	return "", fmt.Errorf("cannot build the etcd helper (%v) and no etcd binary in PATH", buildErr)
}

// buildEtcdHelper builds the etcdhelper module next to this file (etcd's
// embed package at the client's version) with testserver.BuildHelper.
func buildEtcdHelper() (string, error) {
	src, err := testserver.HelperSource("etcdhelper")
	if err != nil {
		return "", err
	}
	bin, _, err := testserver.BuildHelper("etcdhelper", src)
	return bin, err
}

func etcdContainer(t testserver.TB) *EtcdServer {
	t.Helper()
	addr := testserver.StartContainer(t, testserver.ContainerSpec{
		Image: EtcdImage,
		Port:  "2379/tcp",
		Cmd: []string{"/usr/local/bin/etcd",
			"--data-dir", "/tmp/etcd",
			"--listen-client-urls", "http://0.0.0.0:2379",
			"--advertise-client-urls", "http://127.0.0.1:2379",
		},
		WaitLog: "ready to serve client requests",
	})
	if addr == "" {
		return nil
	}
	return &EtcdServer{Endpoints: []string{addr}}
}

// etcdHealthy asks a member's /health endpoint, which answers true once the
// member has a leader and serves requests.
func etcdHealthy(ctx context.Context, addr string) error {
	var h struct {
		Health string `json:"health"`
		Reason string `json:"reason"`
	}
	if err := etcdHTTP(ctx, http.MethodGet, addr, "/health", &h); err != nil {
		return err
	}
	if h.Health != "true" {
		return fmt.Errorf("etcd %s: health=%s %s", addr, h.Health, h.Reason)
	}
	return nil
}

// etcdStatus is the part of the maintenance Status reply this package
// reads, through etcd's JSON gateway (uint64s are JSON strings there).
type etcdStatus struct {
	Header struct {
		MemberID string `json:"member_id"`
	} `json:"header"`
	Leader string `json:"leader"`
}

func etcdHTTP(ctx context.Context, method, addr, path string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, testserver.CallTimeout)
	defer cancel()
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader("{}")
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, body)
	if err != nil {
		return err
	}
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("etcd %s%s: HTTP %d: %q", addr, path, resp.StatusCode, b)
	}
	return nil
}

// Leader returns the member that currently leads, asking the running
// members in turn; an error when none knows a leader.
func (s *EtcdServer) Leader(ctx context.Context) (*EtcdMember, error) {
	if len(s.Members) == 0 {
		return nil, errors.New("testserver: etcd members not started by this package")
	}
	return testserver.FindLeader(ctx, "etcd", s.Members, func(m *EtcdMember) *testserver.Process { return m.Proc }, etcdLeads)
}

// etcdLeads returns nil when m says it leads, else why not.
func etcdLeads(ctx context.Context, m *EtcdMember) error {
	var st etcdStatus
	if err := etcdHTTP(ctx, http.MethodPost, m.ClientAddr, "/v3/maintenance/status", &st); err != nil {
		return err
	}
	if st.Leader == "" || st.Leader == "0" {
		return fmt.Errorf("member %s knows no leader", m.Name)
	}
	if st.Leader != st.Header.MemberID {
		return fmt.Errorf("member %s follows %s, which no running member claims to be", m.Name, st.Leader)
	}
	return nil
}

// WaitLeader polls until a running member other than not (which may be nil)
// leads and reports itself healthy, or ctx ends.
func (s *EtcdServer) WaitLeader(ctx context.Context, not *EtcdMember) (*EtcdMember, error) {
	l, err := testserver.PollFor(ctx, 50*time.Millisecond, func(ctx context.Context) (*EtcdMember, error) {
		l, err := s.Leader(ctx)
		if err != nil {
			return nil, err
		}
		if l == not {
			return nil, fmt.Errorf("leader is still %s", l.Name)
		}
		return l, etcdHealthy(ctx, l.ClientAddr)
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for an etcd leader: %w", err)
	}
	return l, nil
}

// Member returns the member whose client address is addr, or nil.
func (s *EtcdServer) Member(addr string) *EtcdMember {
	for _, m := range s.Members {
		if m.ClientAddr == trimScheme(addr) {
			return m
		}
	}
	return nil
}

// Kill kills the member with SIGKILL.
func (m *EtcdMember) Kill() error { return m.Proc.Kill() }

// Stop stops the member with SIGTERM (SIGKILL after 10s).
func (m *EtcdMember) Stop() error { return m.Proc.Stop() }

// Pause freezes the member with SIGSTOP.
func (m *EtcdMember) Pause() error { return m.Proc.Pause() }

// Resume continues a paused member.
func (m *EtcdMember) Resume() error { return m.Proc.Resume() }

// Restart starts the member again with its data directory and ports and
// waits until it is healthy (which needs a quorum of members running).
func (m *EtcdMember) Restart(ctx context.Context) error { return m.Proc.Restart(ctx) }

// String returns the member's name and client address.
func (m *EtcdMember) String() string { return m.Name + "@" + m.ClientAddr }
