package handlers

// DescribeConfigs (key 32), v1-v4.
//   v1: synonyms on request; v3: config type and documentation; v4+: flexible.
// Topic resources list every topic config with its effective value and source
// on this broker (its own broker configs before the cluster-wide ones);
// broker resources the broker-level defaults for those keys (a broker id every
// key, "" only those set cluster-wide); group resources (type 32) the group
// configs of share groups; client metrics resources (type 16) a subscription's
// three keys, any name, an unknown one at its defaults (as Kafka 4.4); broker
// logger resources (type 8, this broker's id) every logger and its level
// (loglevels). A null or empty list of config names describes every config.
// A topic's values are shown as Kafka's parser reads them back (TRUE as true,
// " 0100" as 100: metadata.Image.DescribeTopicConfigs).
// Synonyms and documentation as Kafka
// 4.4 lists them (metadata.ConfigEntry); loggers have neither. A broker key
// Kafka defines without a default (log.retention.ms) set nowhere is null. Sensitive configs: none. An invalid topic name is INVALID_TOPIC_EXCEPTION,
// an unknown one UNKNOWN_TOPIC_OR_PARTITION; a broker id is parsed as an
// integer ("01" is broker 1), and one but this broker's, or not an integer, is
// INVALID_REQUEST, as Kafka answers (clients send a broker's resource to it),
// in Kafka's words ("expected 1 or empty string, but received 2").

import (
	"context"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) describeConfigs(_ context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	img := h.cluster.Image()
	for _, rr := range req.Resources {
		res := kmsg.NewDescribeConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		var entries []metadata.ConfigEntry
		var err error
		switch metadata.ResourceType(rr.ResourceType) {
		case metadata.ResourceTopic:
			if err = metadata.ValidateTopicName(rr.ResourceName); err == nil {
				entries, err = img.DescribeTopicConfigs(rr.ResourceName, h.cfg.NodeID)
			}
		case metadata.ResourceBroker:
			name := rr.ResourceName
			if name != "" {
				// Kafka describes its own configs under any spelling of its id.
				err = h.checkOwnID(name, describeBrokerNotInt, describeBrokerOther)
				name = strconv.Itoa(int(h.cfg.NodeID))
			}
			if err == nil {
				entries = img.BrokerConfigEntries(name)
			}
		case metadata.ResourceGroup:
			if err = metadata.ValidateGroupResource(rr.ResourceName); err == nil {
				entries = img.GroupConfigEntries(rr.ResourceName)
			}
		case metadata.ResourceClientMetrics:
			if err = metadata.ValidateClientMetricsResource(rr.ResourceName); err == nil {
				entries = img.ClientMetricsEntries(rr.ResourceName)
			}
		case metadata.ResourceBrokerLogger:
			if h.cfg.Loggers == nil {
				_, err = metadata.LookupConfig(metadata.ResourceBrokerLogger, "") // the unsupported type's refusal
			} else if rr.ResourceName == "" {
				err = &metadata.KafkaError{Code: kerr.InvalidRequest.Code, Msg: describeLoggerNoBroker}
			} else if err = h.checkOwnID(rr.ResourceName, describeBrokerNotInt, describeLoggerOther); err == nil {
				for _, l := range h.cfg.Loggers.List() {
					entries = append(entries, metadata.ConfigEntry{Name: l.Name, Value: l.Level, Source: metadata.SourceBrokerLogger})
				}
			}
		default:
			_, err = metadata.LookupConfig(metadata.ResourceType(rr.ResourceType), "") // the unsupported type's refusal
		}
		if err != nil {
			res.ErrorCode = errorCode(err)
			msg := err.Error()
			res.ErrorMessage = &msg
			resp.Resources = append(resp.Resources, res)
			continue
		}
		for _, e := range entries {
			if len(rr.ConfigNames) > 0 && !slices.Contains(rr.ConfigNames, e.Name) {
				continue
			}
			c := kmsg.NewDescribeConfigsResponseResourceConfig()
			c.Name = e.Name
			if !e.NullValue {
				v := e.Value
				c.Value = &v
			}
			c.Source = kmsg.ConfigSource(e.Source)
			c.IsDefault = e.IsDefault
			c.ConfigType = kmsg.ConfigType(e.Type)
			if req.IncludeDocumentation {
				doc := e.Documentation
				c.Documentation = &doc
			}
			if req.IncludeSynonyms {
				for _, s := range e.Synonyms {
					syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
					sv := s.Value
					syn.Name, syn.Value, syn.Source = s.Name, &sv, kmsg.ConfigSource(s.Source)
					c.ConfigSynonyms = append(c.ConfigSynonyms, syn)
				}
			}
			res.Configs = append(res.Configs, c)
		}
		resp.Resources = append(resp.Resources, res)
	}
	return reply(resp)
}
