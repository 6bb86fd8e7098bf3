//go:build !unit

package netfault_test

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/testbed/netfault"
	"github.com/durableclaims/durableclaims/testbed/testenv"
)

// echo serves lines back until the test ends.
func echo(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

// roundTrip sends a line and waits up to within for it to come back.
func roundTrip(c net.Conn, r *bufio.Reader, within time.Duration) (time.Duration, error) {
	began := time.Now()
	if err := c.SetDeadline(began.Add(within)); err != nil {
		return 0, err
	}
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return 0, err
	}
	_, err := r.ReadString('\n')
	return time.Since(began), err
}

// A partition drops everything on the open connection and leaves it open;
// latency delays both ways; a reset cuts the connection; each heals.
func TestFaultsActOnOpenConnectionsAndHeal(t *testing.T) {
	s := testenv.Toxiproxy(t)
	link, err := s.Link("echo", echo(t))
	require.NoError(t, err)
	c, err := net.Dial("tcp", link.Addr)
	require.NoError(t, err)
	defer c.Close()
	r := bufio.NewReader(c)
	_, err = roundTrip(c, r, 5*time.Second)
	require.NoError(t, err, "the link carries data before any fault")

	heal, err := link.Apply(netfault.Fault{Kind: netfault.Latency, Delay: 300 * time.Millisecond})
	require.NoError(t, err)
	took, err := roundTrip(c, r, 5*time.Second)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, took, 600*time.Millisecond, "latency is added each way")
	require.NoError(t, heal())

	heal, err = link.Apply(netfault.Fault{Kind: netfault.Partition})
	require.NoError(t, err)
	_, err = roundTrip(c, r, time.Second)
	var ne net.Error
	require.ErrorAs(t, err, &ne, "a partition answers nothing")
	assert.True(t, ne.Timeout(), "the connection stays open, silent: %v", err)
	require.NoError(t, heal())

	// The partition dropped that line; a new connection works at once.
	c2, err := net.Dial("tcp", link.Addr)
	require.NoError(t, err)
	defer c2.Close()
	_, err = roundTrip(c2, bufio.NewReader(c2), 5*time.Second)
	require.NoError(t, err, "healed")

	heal, err = link.Apply(netfault.Fault{Kind: netfault.Reset})
	require.NoError(t, err)
	_, err = roundTrip(c2, bufio.NewReader(c2), 5*time.Second)
	require.Error(t, err, "a reset cuts the request off")
	assert.False(t, errorIsTimeout(err), "a reset is not a silence: %v", err)
	require.NoError(t, heal())

	_, err = link.Apply(netfault.Fault{Kind: "flood"})
	assert.ErrorContains(t, err, `unknown fault kind "flood"`)
}

func errorIsTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
