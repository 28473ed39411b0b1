// Package subreconciletest runs a subreconcile chain inside a test and
// asserts which steps acted, in which order, and the requeue that came out.
//
// Start with [New], over the chain's Config, and drive the chain loop by loop
// (Using it has a longer run):
//
//	h := subreconciletest.New(t, cfg)
//	h.Run(db).ExpectActed("AddPVCs", "AddPods").ExpectRequeueAfter(15 * time.Second)
//
// The runner is the real one: the harness fills in only what the Config
// leaves nil (a fake clock, a recording event recorder, a private
// registry), so time moves only when the test steps h.Clock, unless the
// Config brought its own. There is no API server: test a step's Kubernetes
// calls against testenv.
//
// # Using it
//
// A Harness wires the runner to a fake clock, a recording event recorder, a
// private Prometheus registry and the test's logger, so a test can drive a
// chain loop by loop:
//
//	h := subreconciletest.New(t, cfg)
//	h.Run(db).
//		ExpectActed("AddPVCs", "AddPods").
//		ExpectStoppedAt("AddPods").
//		ExpectRequeueAfter(15 * time.Second)
//	h.Clock.Step(15 * time.Second)
//	h.Run(db).ExpectActed().ExpectNoRequeue()
//
// Expectations report with t.Errorf, so one run shows every mismatch.
//
// To test one step on its own, give New a one-step Config; its NewState
// supplies the per-loop state the step will see.
//
// # Guarantees
//
//   - The runner is the real subreconcile.Runner built from the Config
//     given: the harness fills in only what the Config leaves nil (the
//     clock, a fake one at Epoch; the event recorder, h.Events; the metrics,
//     on h.Registry) and never changes how a loop runs.
//   - Time moves only when the test steps h.Clock (unless the Config
//     brought its own clock).
//   - Result.Events holds exactly the events recorded during that loop;
//     events of earlier loops are not carried over.
//   - Metrics go to a registry of the harness's own, never the global one,
//     so tests may run in parallel.
//   - An invalid Config fails the test at New.
//
// # What it does not guarantee
//
//   - Anything of the object's life outside the loop: there is no API
//     server, no status write and no watch; the test hands Run the object
//     and inspects it afterwards. Test a step's Kubernetes calls against
//     testenv.
//   - Events when the Config brought its own recorder: Result.Events is then
//     empty and ExpectEvents sees nothing.
//   - Safety for concurrent Runs on one Harness: the event buffer is shared,
//     so one loop's events may land in another's Result.
package subreconciletest
