// Package redistest runs a real redis-server for tests, on a free loopback
// port with its own data directory, so the shared backend is tested
// against the server it will meet in production rather than a double.
package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/testkit/freeport"
)

// Server is one redis-server process started by a test.
type Server struct {
	Addr string // host:port on 127.0.0.1
	Dir  string // its data directory, kept across Restart
	args []string
	cmd  *exec.Cmd
	t    testing.TB
}

// Start runs redis-server with append-only persistence fsynced on every
// write (appendfsync always), extra config lines appended as
// "--name value" arguments (e.g. "--appendfsync", "everysec"). The server
// stops when the test ends. A missing redis-server fails the test: CI
// installs the Debian package.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server is not installed (apt-get install redis-server): %v", err)
	}
	s := &Server{Dir: t.TempDir(), t: t}
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(freeport.Loopback(t)))
	_, port, _ := net.SplitHostPort(s.Addr)
	s.args = append([]string{
		"--port", port, "--bind", "127.0.0.1", "--dir", s.Dir,
		"--save", "", "--appendonly", "yes", "--appendfsync", "always",
		"--protected-mode", "no", "--loglevel", "warning",
	}, extra...)
	s.start()
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) start() {
	s.t.Helper()
	s.cmd = exec.Command("redis-server", s.args...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if s.ping() == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.Stop()
	s.t.Fatalf("redis-server at %s did not answer PING", s.Addr)
}

// Stop shuts the server down (SIGTERM, which flushes the append-only file)
// and waits for it; stopping a stopped server does nothing.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(interruptSignal)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
	s.cmd = nil
}

// Kill ends the server with SIGKILL: only what it fsynced survives.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Restart starts the server again on the same port and data directory.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.start()
}

// ping sends one inline PING and expects +PONG.
func (s *Server) ping() error {
	c, err := net.DialTimeout("tcp", s.Addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("redis answered %q", line)
	}
	return nil
}
