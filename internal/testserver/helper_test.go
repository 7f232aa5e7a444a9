package testserver

import (
	"path/filepath"
	"testing"
	"time"
)

func TestHelperBuildLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	unlock, err := lockFile(path, time.Second)
	if err != nil {
		t.Fatalf("first lock: %v", err)
	}
	if _, err := lockFile(path, 300*time.Millisecond); err == nil {
		t.Fatalf("second lock succeeded while the first was held")
	}
	unlock()
	unlock2, err := lockFile(path, time.Second)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	unlock2()
}

func TestContainerArgs(t *testing.T) {
	got := containerArgs(ContainerSpec{
		Image:          "mariadb:10.11",
		Port:           "3306/tcp",
		Env:            map[string]string{"B": "2", "A": "1"},
		Cmd:            []string{"mariadbd", "--skip-log-bin"},
		WaitLog:        "ready for connections",
		WaitOccurrence: 2,
	})
	want := []string{"-image", "mariadb:10.11", "-port", "3306/tcp", "-env", "A=1", "-env", "B=2",
		"-wait-log", "ready for connections", "-wait-occurrence", "2", "--", "mariadbd", "--skip-log-bin"}
	if len(got) != len(want) {
		t.Fatalf("containerArgs = %q, want %q", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("containerArgs = %q, want %q", got, want)
		}
	}
}
