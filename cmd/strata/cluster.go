package main

// strata cluster status: brokers, controller, topic and partition health;
// add-controller and remove-controller are in cluster_voters.go,
// decommission in cluster_decommission.go, rebalance in cluster_rebalance.go.

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strata-stream/strata/internal/cli"
)

func clusterCmd() *cobra.Command { return newClusterCmd(processEnv()) }

func newClusterCmd(env *clientEnv) *cobra.Command {
	g := &globalFlags{}
	cmd := newParentCmd(env, g, "cluster", "Inspect the cluster, change its controller voters, retire brokers, rebalance")
	cmd.AddCommand(clusterStatusCmd(env, g), clusterAddControllerCmd(env, g), clusterRemoveControllerCmd(env, g),
		clusterDecommissionCmd(env, g), clusterRebalanceCmd(env, g))
	return cmd
}

type clusterStatusJSON struct {
	ClusterID       string                `json:"cluster_id"`
	Controller      int32                 `json:"controller"` // -1: none known
	Brokers         []clusterBrokerJSON   `json:"brokers"`
	Topics          int                   `json:"topics"`
	InternalTopics  int                   `json:"internal_topics"`
	Partitions      int                   `json:"partitions"`
	UnderReplicated []partitionHealthJSON `json:"under_replicated_partitions"`
	Offline         []partitionHealthJSON `json:"offline_partitions"`
}

type clusterBrokerJSON struct {
	ID   int32   `json:"id"`
	Host string  `json:"host"`
	Port int32   `json:"port"`
	Rack *string `json:"rack"`
}

type partitionHealthJSON struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Leader    int32   `json:"leader"`
	Replicas  []int32 `json:"replicas"`
	ISR       []int32 `json:"isr"`
}

func clusterStatusCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:               "status",
		Short:             "Show brokers, the active controller, topic and partition counts, under-replicated and offline partitions",
		Args:              usageArgs(env, cobra.NoArgs),
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	cmd.RunE = clientRun(env, g, func(ctx context.Context, s *session, _ *cobra.Command, _ []string) error {
		return s.withAdmin(ctx, func(ctx context.Context, adm *kadm.Client) error {
			m, err := adm.Metadata(ctx)
			if err != nil {
				return err
			}
			out := clusterStatusJSON{ClusterID: m.Cluster, Controller: m.Controller, Brokers: []clusterBrokerJSON{},
				UnderReplicated: []partitionHealthJSON{}, Offline: []partitionHealthJSON{}}
			for _, b := range m.Brokers {
				out.Brokers = append(out.Brokers, clusterBrokerJSON{ID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack})
			}
			for _, t := range m.Topics.Sorted() {
				if t.Err != nil {
					return brokerError(fmt.Sprintf("topic %q", t.Topic), t.Err, "")
				}
				if t.IsInternal {
					out.InternalTopics++
				} else {
					out.Topics++
				}
				for _, p := range t.Partitions.Sorted() {
					out.Partitions++
					h := partitionHealthJSON{Topic: t.Topic, Partition: p.Partition, Leader: p.Leader,
						Replicas: nonNil(p.Replicas), ISR: nonNil(p.ISR)}
					if p.Leader < 0 {
						out.Offline = append(out.Offline, h)
					}
					if len(p.ISR) < len(p.Replicas) {
						out.UnderReplicated = append(out.UnderReplicated, h)
					}
				}
			}
			if s.json() {
				return cli.WriteJSON(s.env.stdout, out)
			}
			w := s.env.stdout
			controller := "none"
			if out.Controller >= 0 {
				controller = strconv.Itoa(int(out.Controller))
			}
			fmt.Fprintf(w, "Cluster ID:        %s\n", out.ClusterID)
			fmt.Fprintf(w, "Active controller: %s\n", controller)
			fmt.Fprintf(w, "Brokers:           %d\n", len(out.Brokers))
			fmt.Fprintf(w, "Topics:            %d (+%d internal)\n", out.Topics, out.InternalTopics)
			fmt.Fprintf(w, "Partitions:        %d\n", out.Partitions)
			fmt.Fprintf(w, "Under-replicated:  %d\n", len(out.UnderReplicated))
			fmt.Fprintf(w, "Offline:           %d\n", len(out.Offline))
			fmt.Fprintln(w)
			tw := cli.NewTable(w, "BROKER", "ADDRESS", "RACK", "CONTROLLER")
			for _, b := range out.Brokers {
				rack := "-"
				if b.Rack != nil {
					rack = *b.Rack
				}
				active := ""
				if b.ID == out.Controller {
					active = "active"
				}
				tw.Row(b.ID, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))), rack, active)
			}
			tw.Flush()
			for _, list := range []struct {
				name string
				ps   []partitionHealthJSON
			}{{"Under-replicated partitions", out.UnderReplicated}, {"Offline partitions", out.Offline}} {
				if len(list.ps) == 0 {
					continue
				}
				fmt.Fprintf(w, "\n%s:\n", list.name)
				tw := cli.NewTable(w, "TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR")
				for _, p := range list.ps {
					tw.Row(p.Topic, p.Partition, p.Leader, cli.JoinInt32s(p.Replicas), cli.JoinInt32s(p.ISR))
				}
				tw.Flush()
			}
			return nil
		})
	})
	return cmd
}
