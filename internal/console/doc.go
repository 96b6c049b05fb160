// Package console is Strata's web console: server-rendered html/template pages
// under /console/ on the node's HTTP listener, with a small embedded stylesheet and
// script (no CDN, no build step, works without internet).
//
// Pages and endpoints (all relative to /console/):
//
//	GET  /                        cluster overview: brokers, active controller,
//	                              partition health counts
//	GET  topics                   topics with partition health, size and messages/s
//	GET  new-topic                the create-topic form (not under topics/:
//	                              "new" is a topic name)
//	POST topics                   create a topic through the controller (as
//	                              CreateTopics does), then redirect to its page
//	GET  topics/{topic}           partitions: leader, replicas, ISR, log start
//	                              (a tiered one's remote start), high-water
//	                              mark, size, messages/s
//	GET  topics/{topic}/records   recent records of one partition (key, value,
//	                              headers), read through the replica layer
//	                              (and the object store, of a tiered one)
//	GET  groups                   consumer groups with state, members and lag
//	GET  groups/{group}           members, assignment, lag and a live lag chart
//	POST groups/{group}/offsets   reset the group's offsets for a topic
//	GET  api/topics/{topic}       partition figures as JSON (the page's refresh)
//	GET  api/groups/{group}/lag   lag as JSON (the lag chart's feed)
//	GET  static/...               the embedded stylesheet and script
//
// Messages per second come from two samples of a partition's high-water mark taken
// at least a second apart: each view or JSON poll takes a sample, so a page shows
// rates from its first refresh on.
//
// The console reads what this node knows: the metadata image (every topic and
// broker) and the partitions it hosts (offsets, sizes and records of partitions
// led elsewhere show as unknown). The group pages go over the Kafka protocol
// instead (Config.Admin): the list names every group of the cluster
// (ListGroups of every broker), and it, a group's page and its lag JSON
// describe consumer groups with admin.GroupViews, as `strata group describe`
// and the HTTP API's GET /groups/{group} do, whichever node coordinates them;
// the offset reset goes the same way. Without an admin client the list says
// so and the rest answer 503. POSTs must come from
// the console's own origin (cross-origin form posts are refused).
//
// With Config.Guard set (SASL or an authorizer on the node), every page needs a
// signed-in principal and the ACLs its access rule names (access.go).
//
// Concurrency: a Console is safe for concurrent use; handlers share only the rate
// sampler, which has its own mutex.
package console
