package redistest

import "testing"

func TestStartRestart(t *testing.T) {
	s := Start(t)
	if err := s.ping(); err != nil {
		t.Fatal(err)
	}
	s.Restart()
	if err := s.ping(); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	if err := s.ping(); err == nil {
		t.Fatal("a killed server still answers")
	}
}
