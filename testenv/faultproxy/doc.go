// Package faultproxy is a TCP proxy on loopback that injects network faults
// between a client and one server, for chaos and failure tests. It forwards
// bytes and never parses them, so it serves TLS to kube-apiserver, etcd's
// gRPC and the object stores' HTTP alike.
//
// Faults are set per proxy at run time, and each can be lifted on its own
// or all at once with [Proxy.Heal]:
//
//   - Latency ([Proxy.SetLatency]): each chunk of bytes is held for the
//     given time before it is forwarded, per direction. Throughput is kept:
//     chunks are delayed, not serialised behind each other's delays.
//   - Blackhole ([Proxy.SetBlackhole]): connections are accepted and held,
//     and nothing is forwarded either way (nor are new connections dialled
//     to the server) until it is lifted. Bytes are held, not lost, as TCP
//     would retransmit them across a short partition: when the blackhole is
//     lifted before the client gives up, the stream goes on intact. Clients
//     see timeouts, never errors from the network.
//   - Reset ([Proxy.Reset]): every current connection is closed with a TCP
//     RST, on both the client and the server side.
//   - Refuse ([Proxy.SetRefuse]): new connections are accepted and reset at
//     once (the client sees ECONNRESET on its first read or write rather
//     than ECONNREFUSED: the listener stays bound, so no other process can
//     take the port). Current connections go on.
//   - One-way partition ([Proxy.SetDrop]): bytes in one direction are read
//     and discarded. Dropping [ToClient] lets requests reach the server and
//     be applied while their answers are lost, so the client cannot know the
//     outcome. A connection that lost bytes has a gap in its stream and is
//     useless: when the drop is lifted, such connections are reset.
//
// Guarantees:
//
//   - A fault applies to connections already open and to new ones, from the
//     moment its setter returns (bytes already handed to the kernel may
//     still arrive).
//   - Close stops the listener, resets every connection and returns after
//     every goroutine of the proxy has ended.
//
// Not provided: faults of single requests or responses (use an HTTP-level
// injector such as backupstore/internal/proxytest, which counts requests,
// delays them and fails the ones a test picks, and stays because it works
// on requests, not bytes), bandwidth limits, packet reordering, or faults of
// UDP.
package faultproxy
