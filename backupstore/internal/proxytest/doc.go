// Package proxytest is a loopback HTTP proxy for tests and benchmarks of
// backupstore: it sits in front of a real object store, counts requests,
// adds a fixed delay to each (a cloud region 10 ms away), fails the
// requests a test chooses (an outage part-way through a deletion) and lets a
// test answer requests itself (a store that answers oddly).
//
//	p := proxytest.Start(t, minioURL) // stopped when the test ends
//	p.SetFail(func(r *http.Request) bool { return r.Method == http.MethodDelete })
//
// # Guarantees
//
//   - A request that is neither failed nor answered by the handler reaches
//     the store unchanged, Host header included (S3 signatures cover it),
//     and its answer comes back unchanged.
//   - A failed request never reaches the store: it is answered 503 Service
//     Unavailable, and counted by Failed.
//   - A request whose answer is lost (SetLoseAnswer) reaches the store,
//     which acts on it; the client gets 503 Service Unavailable instead of
//     the store's answer, and it is counted by Lost.
//   - Requests counts every request received, failed, handled or
//     forwarded. SetDelay, SetFail, SetHandler and SetLoseAnswer take
//     effect for requests received after they return, and are safe to call
//     while requests are in flight.
//   - It listens on 127.0.0.1 only, on a free port, and is closed when the
//     test ends.
//
// # What it does not guarantee
//
//   - Faults below HTTP: it does not cut connections or drop replies after
//     the store acted (locking/locktest.Proxy does that for the lock
//     backends); a failed request is one the store never saw, a lost
//     answer is replaced by an HTTP error.
//   - TLS: it speaks plain HTTP to the client and to the store.
//   - Exact timing: the delay is a sleep per request, on top of the
//     store's own latency.
package proxytest
