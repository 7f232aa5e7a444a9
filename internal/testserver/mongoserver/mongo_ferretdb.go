package mongoserver

import (
	"context"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/golocker/locker/internal/testserver"
)

// startFerretDB starts FerretDB with its SQLite backend on a free loopback
// port, its databases in a temp dir.
func startFerretDB(t testserver.TB) *MongoServer {
	t.Helper()
	bin := ferretdbBinary(t)
	if bin == "" {
		return nil
	}
	dir := t.TempDir()
	port := testserver.FreePort(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	uri := "mongodb://" + addr + "/"
	proc := testserver.StartProcess(t, testserver.ProcessSpec{
		Name:  "ferretdb",
		Path:  bin,
		Args:  []string{"-listen", addr, "-dir", filepath.Join(dir, "data")},
		Dir:   dir,
		Ready: func(ctx context.Context) error { return mongoPing(ctx, uri) },
	})
	if proc == nil {
		return nil
	}
	return &MongoServer{URI: uri, Addr: addr, Proc: proc, FerretDB: true}
}

// ferretdbBinary returns the path of the FerretDB helper, building it on
// first use (see testserver.BuildHelper). When it cannot be had (no module
// proxy, a broken build) the test is skipped, or failed under
// LOCKER_REQUIRE_SERVERS=1, with the reason.
func ferretdbBinary(t testserver.TB) string {
	t.Helper()
	bin, built, err := ferretdbBuild()
	if err != nil {
		testserver.Unavailable(t, "no MongoDB: mongod not found and the FerretDB stand-in could not be built: %v", err)
		return ""
	}
	if built > 0 {
		t.Logf("testserver: built FerretDB helper %s in %v", bin, built.Round(time.Millisecond))
	}
	return bin
}

// ferretdbBuild returns the helper binary built from the module in the
// directory ferretdb next to this file, and how long a build took (0 if
// none ran).
func ferretdbBuild() (string, time.Duration, error) {
	src, err := testserver.HelperSource("ferretdb")
	if err != nil {
		return "", 0, err
	}
	return testserver.BuildHelper("ferretdb", src)
}
