package zkserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/golocker/locker/internal/testserver"
)

// Environment variables for ZooKeeper.
const (
	// EnvZooKeeperAddrs names a ZooKeeper the user already runs:
	// "127.0.0.1:2181" (or several servers of one ensemble, comma-separated).
	EnvZooKeeperAddrs = "LOCKER_TEST_ZK_ADDRS"
	// EnvZooKeeperEnsembleAddrs names the servers of a multi-server
	// ensemble: "127.0.0.1:2181,127.0.0.1:2182,127.0.0.1:2183".
	EnvZooKeeperEnsembleAddrs = "LOCKER_TEST_ZK_ENSEMBLE_ADDRS"
	// EnvZooKeeperClasspath is the Java classpath holding ZooKeeper's
	// server and its dependencies, e.g. "/opt/zookeeper/lib/*", when it is
	// not Debian's /usr/share/java/zookeeper.jar.
	EnvZooKeeperClasspath = "LOCKER_TEST_ZK_CLASSPATH"
)

// ZooKeeperTickTime is the tickTime of the servers this package starts.
// Sessions can be as short as 2 ticks, so session expiry is testable in
// well under a second.
const ZooKeeperTickTime = 200 * time.Millisecond

// ZooKeeperImage is the image used when ZooKeeper is started in a
// container.
const ZooKeeperImage = "zookeeper:3.8"

const zkInstallHint = "install Debian package zookeeper (scripts/install-test-deps.sh)"

// ZooKeeperServer is a standalone ZooKeeper or an ensemble.
type ZooKeeperServer struct {
	// Addrs are the client addresses (host:port) of the servers.
	Addrs []string
	// Nodes are the servers this package started; empty when an
	// environment variable or a container named the server.
	Nodes []*ZooKeeperNode
}

// ZooKeeperNode is one ZooKeeper server process.
type ZooKeeperNode struct {
	ID   int                 // server id (myid), from 1
	Addr string              // client host:port
	Proc *testserver.Process // the JVM
}

// ZooKeeper returns a standalone ZooKeeper: the one named by
// LOCKER_TEST_ZK_ADDRS, else one started from Debian's jars on a free
// loopback port, else a container.
func ZooKeeper(t testserver.TB) *ZooKeeperServer {
	t.Helper()
	if addrs := testserver.EnvAddrs(EnvZooKeeperAddrs); len(addrs) > 0 {
		return envZooKeeper(t, EnvZooKeeperAddrs, addrs)
	}
	return startZooKeeper(t, 1)
}

// ZooKeeperEnsemble returns a 3-server ensemble: the one named by
// LOCKER_TEST_ZK_ENSEMBLE_ADDRS, else three servers started in parallel.
// It returns once every server serves as leader or follower.
func ZooKeeperEnsemble(t testserver.TB) *ZooKeeperServer {
	t.Helper()
	if addrs := testserver.EnvAddrs(EnvZooKeeperEnsembleAddrs); len(addrs) > 0 {
		return envZooKeeper(t, EnvZooKeeperEnsembleAddrs, addrs)
	}
	return startZooKeeper(t, 3)
}

func envZooKeeper(t testserver.TB, env string, addrs []string) *ZooKeeperServer {
	t.Helper()
	testserver.CheckEnvServers(t, env, addrs)
	return &ZooKeeperServer{Addrs: addrs}
}

// zooKeeperJava returns the java binary and the classpath of ZooKeeper's
// server, or "" when either is missing.
func zooKeeperJava() (java, classpath string) {
	java = testserver.LookPath([]string{"java"}, "/usr/bin", "/usr/local/bin")
	if cp := testserver.EnvAddr(EnvZooKeeperClasspath); cp != "" {
		return java, cp
	}
	// Debian's zookeeper.jar lists its dependencies in its manifest;
	// slf4j-simple, when present, sends the server's log to stderr.
	if _, err := os.Stat("/usr/share/java/zookeeper.jar"); err == nil {
		cp := "/usr/share/java/zookeeper.jar"
		if _, err := os.Stat("/usr/share/java/slf4j-simple.jar"); err == nil {
			cp += ":/usr/share/java/slf4j-simple.jar"
		}
		return java, cp
	}
	return java, ""
}

func startZooKeeper(t testserver.TB, n int) *ZooKeeperServer {
	t.Helper()
	java, cp := zooKeeperJava()
	if java == "" || cp == "" {
		if n == 1 && testserver.DockerAvailable() {
			return zooKeeperContainer(t)
		}
		testserver.Unavailable(t, "no ZooKeeper: java or ZooKeeper's jars not found; %s, set %s or set %s", zkInstallHint, EnvZooKeeperClasspath, EnvZooKeeperAddrs)
		return nil
	}
	type ports struct{ client, quorum, election int }
	ps := make([]ports, n)
	var servers []string
	for i := range ps {
		ps[i] = ports{testserver.FreePort(t), testserver.FreePort(t), testserver.FreePort(t)}
		servers = append(servers, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", i+1, ps[i].quorum, ps[i].election))
	}
	z := &ZooKeeperServer{}
	specs := make([]testserver.ProcessSpec, n)
	for i := range specs {
		dir := t.TempDir()
		dataDir := filepath.Join(dir, "data")
		cfg := []string{
			"tickTime=" + strconv.Itoa(int(ZooKeeperTickTime/time.Millisecond)),
			"initLimit=50",
			"syncLimit=10",
			"dataDir=" + dataDir,
			"clientPort=" + strconv.Itoa(ps[i].client),
			"clientPortAddress=127.0.0.1",
			"maxClientCnxns=0",
			"admin.enableServer=false",
			"4lw.commands.whitelist=srvr,mntr,ruok,stat,conf",
			"forceSync=no",
			"preAllocSize=1024",
		}
		if n > 1 {
			cfg = append(cfg, servers...)
		}
		if err := writeZooKeeperConfig(dir, dataDir, i+1, cfg); err != nil {
			t.Fatalf("testserver: %v", err)
			return nil
		}
		node := &ZooKeeperNode{ID: i + 1, Addr: fmt.Sprintf("127.0.0.1:%d", ps[i].client)}
		z.Nodes = append(z.Nodes, node)
		z.Addrs = append(z.Addrs, node.Addr)
		addr := node.Addr
		specs[i] = testserver.ProcessSpec{
			Name: fmt.Sprintf("zookeeper-%d", i+1),
			Path: java,
			Args: []string{
				"-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
				"-XX:-UsePerfData", "-Xshare:auto", "-Djava.net.preferIPv4Stack=true",
				"-Dzookeeper.jmx.log4j.disable=true",
				"-cp", cp,
				"org.apache.zookeeper.server.quorum.QuorumPeerMain",
				filepath.Join(dir, "zoo.cfg"),
			},
			Dir: dir,
			Ready: func(ctx context.Context) error {
				_, err := zooKeeperMode(ctx, addr)
				return err
			},
			ReadyTimeout: 90 * time.Second,
		}
	}
	for i, p := range testserver.StartProcesses(t, specs...) {
		z.Nodes[i].Proc = p
	}
	return z
}

func writeZooKeeperConfig(dir, dataDir string, id int, lines []string) error {
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dataDir, "myid"), []byte(strconv.Itoa(id)+"\n"), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "zoo.cfg"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

// ConnectString returns the servers' addresses joined by commas, as
// zk.Connect's callers and zk:// URLs write them.
func (z *ZooKeeperServer) ConnectString() string { return strings.Join(z.Addrs, ",") }

// Leader returns the node that is the ensemble's leader (the only node of a
// standalone server), asking each running node with the srvr command.
func (z *ZooKeeperServer) Leader(ctx context.Context) (*ZooKeeperNode, error) {
	if len(z.Nodes) == 0 {
		return nil, errors.New("testserver: ZooKeeper servers not started by this package")
	}
	return testserver.FindLeader(ctx, "zookeeper", z.Nodes, func(n *ZooKeeperNode) *testserver.Process { return n.Proc }, zkLeads)
}

// zkLeads returns nil when n serves as the leader (or standalone), else
// why not.
func zkLeads(ctx context.Context, n *ZooKeeperNode) error {
	mode, err := n.Mode(ctx)
	if err != nil {
		return err
	}
	if mode != "leader" && mode != "standalone" {
		return fmt.Errorf("%v is a %s", n, mode)
	}
	return nil
}

// WaitServing polls until every running node serves (as standalone, leader
// or follower) and there is a leader, or ctx ends.
func (z *ZooKeeperServer) WaitServing(ctx context.Context) error {
	return testserver.WaitFor(ctx, 50*time.Millisecond, "zookeeper not serving", z.serving)
}

func (z *ZooKeeperServer) serving(ctx context.Context) error {
	leaders := 0
	for _, n := range z.Nodes {
		if !n.Proc.Running() {
			continue
		}
		mode, err := n.Mode(ctx)
		if err != nil {
			return err
		}
		if mode == "leader" || mode == "standalone" {
			leaders++
		}
	}
	if leaders != 1 {
		return fmt.Errorf("%d leaders", leaders)
	}
	return nil
}

// Mode returns the node's role from the srvr four-letter command:
// "standalone", "leader" or "follower"; an error while it is not serving.
func (n *ZooKeeperNode) Mode(ctx context.Context) (string, error) {
	return zooKeeperMode(ctx, n.Addr)
}

func zooKeeperMode(ctx context.Context, addr string) (string, error) {
	out, err := FourLetterWord(ctx, addr, "srvr")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(out, "\n") {
		if m, ok := strings.CutPrefix(line, "Mode: "); ok {
			return strings.TrimSpace(m), nil
		}
	}
	return "", fmt.Errorf("zookeeper %s: %s", addr, strings.TrimSpace(out))
}

// FourLetterWord sends a four-letter command (srvr, mntr, ruok…) to a
// ZooKeeper server and returns its answer. The servers this package starts
// allow srvr, mntr, ruok, stat and conf. Each call is bounded to 2s (less
// if ctx ends sooner), so a paused server cannot hang it.
func FourLetterWord(ctx context.Context, addr, cmd string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, testserver.CallTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	if err := conn.SetDeadline(deadline); err != nil {
		return "", err
	}
	if _, err := io.WriteString(conn, cmd); err != nil {
		return "", err
	}
	b, err := io.ReadAll(io.LimitReader(conn, 1<<20))
	if err != nil {
		return "", fmt.Errorf("zookeeper %s %s: %w", addr, cmd, err)
	}
	return string(b), nil
}

// Kill kills the server with SIGKILL.
func (n *ZooKeeperNode) Kill() error { return n.Proc.Kill() }

// Stop stops the server with SIGTERM (SIGKILL after 10s).
func (n *ZooKeeperNode) Stop() error { return n.Proc.Stop() }

// Pause freezes the server with SIGSTOP.
func (n *ZooKeeperNode) Pause() error { return n.Proc.Pause() }

// Resume continues a paused server.
func (n *ZooKeeperNode) Resume() error { return n.Proc.Resume() }

// Restart starts the server again with its data and ports and waits until it
// serves (in an ensemble, that needs a quorum).
func (n *ZooKeeperNode) Restart(ctx context.Context) error { return n.Proc.Restart(ctx) }

// String returns the node's id and client address.
func (n *ZooKeeperNode) String() string { return fmt.Sprintf("zookeeper-%d@%s", n.ID, n.Addr) }

func zooKeeperContainer(t testserver.TB) *ZooKeeperServer {
	t.Helper()
	addr := testserver.StartContainer(t, testserver.ContainerSpec{
		Image: ZooKeeperImage,
		Port:  "2181/tcp",
		Env: map[string]string{
			"ZOO_TICK_TIME":              "200",
			"ZOO_4LW_COMMANDS_WHITELIST": "srvr,mntr,ruok",
			"ZOO_ADMINSERVER_ENABLED":    "false",
		},
		WaitLog: "binding to port",
	})
	if addr == "" {
		return nil
	}
	return &ZooKeeperServer{Addrs: []string{addr}}
}
