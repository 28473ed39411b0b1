package testenv

import (
	"errors"
	"testing"
)

// A component that could not bind a port found free is started again on
// other ports; any other failure is returned at once.
func TestOnFreePortsRetriesTakenPorts(t *testing.T) {
	var seen [][]int
	_, err := onFreePorts(2, func(ports []int) (int, error) {
		seen = append(seen, ports)
		if len(seen) < 3 {
			return 0, errors.New("etcd exited before it was ready: listen tcp 127.0.0.1:1: bind: address already in use")
		}
		return 1, nil
	})
	if err != nil || len(seen) != 3 {
		t.Fatalf("err %v after %d attempts, want success on the third", err, len(seen))
	}
	for _, ports := range seen {
		if len(ports) != 2 || ports[0] == ports[1] || ports[0] == 0 {
			t.Errorf("ports %v, want two distinct free ports", ports)
		}
	}
	attempts := 0
	_, err = onFreePorts(1, func([]int) (int, error) { attempts++; return 0, errors.New("bad flag") })
	if err == nil || attempts != 1 {
		t.Errorf("err %v after %d attempts, want the error at once", err, attempts)
	}
	attempts = 0
	_, err = onFreePorts(1, func([]int) (int, error) { attempts++; return 0, errors.New("address already in use") })
	if err == nil || attempts != 3 {
		t.Errorf("err %v after %d attempts, want failure after three", err, attempts)
	}
}
