package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// summarize prints what a response answers: per resource or topic its error
// code, and for DescribeConfigs every config's fields (documentation only as
// present or not), for ListConfigResources the types in the order listed, each
// with the run's own names sorted (Kafka lists them in hash order); msgs holds
// the error messages, shown but not compared.
func summarize(resp kmsg.Response, namesOnly bool, run string) (out, msgs string) {
	var b, m strings.Builder
	code := func(c int16, msg *string) string {
		if msg != nil && *msg != "" {
			fmt.Fprintf(&m, "%q ", *msg)
		}
		if c == 0 {
			return "ok"
		}
		if err := kerr.ErrorForCode(c); err != nil {
			return err.(*kerr.Error).Message
		}
		return fmt.Sprint(c)
	}
	switch r := resp.(type) {
	case *kmsg.DescribeConfigsResponse:
		for _, res := range r.Resources {
			fmt.Fprintf(&b, "[%d %q %s", res.ResourceType, res.ResourceName, code(res.ErrorCode, res.ErrorMessage))
			if namesOnly {
				var names []string
				for _, c := range res.Configs {
					names = append(names, c.Name)
				}
				slices.Sort(names)
				fmt.Fprintf(&b, " %d: %s]", len(names), strings.Join(names, " "))
				continue
			}
			for _, c := range res.Configs {
				fmt.Fprintf(&b, " {%s=%s src=%d def=%v ro=%v sens=%v type=%d doc=%v", c.Name, str(c.Value), c.Source,
					c.IsDefault, c.ReadOnly, c.IsSensitive, c.ConfigType, c.Documentation != nil && *c.Documentation != "")
				for _, syn := range c.ConfigSynonyms {
					fmt.Fprintf(&b, " syn(%s=%s src=%d)", syn.Name, str(syn.Value), syn.Source)
				}
				b.WriteString("}")
			}
			b.WriteString("]")
		}
	case *kmsg.AlterConfigsResponse:
		for _, res := range r.Resources {
			fmt.Fprintf(&b, "[%d %q %s]", res.ResourceType, res.ResourceName, code(res.ErrorCode, res.ErrorMessage))
		}
	case *kmsg.IncrementalAlterConfigsResponse:
		for _, res := range r.Resources {
			fmt.Fprintf(&b, "[%d %q %s]", res.ResourceType, res.ResourceName, code(res.ErrorCode, res.ErrorMessage))
		}
	case *kmsg.CreateTopicsResponse:
		for _, t := range r.Topics {
			fmt.Fprintf(&b, "[%s %s]", strings.SplitN(t.Topic, "-", 2)[0], code(t.ErrorCode, t.ErrorMessage))
		}
	case *kmsg.CreatePartitionsResponse:
		for _, t := range r.Topics {
			fmt.Fprintf(&b, "[%s]", code(t.ErrorCode, t.ErrorMessage))
		}
	case *kmsg.ListConfigResourcesResponse:
		b.WriteString(code(r.ErrorCode, nil))
		var names []string
		flush := func() {
			slices.Sort(names)
			for _, n := range names {
				fmt.Fprintf(&b, " %s", n)
			}
			names = names[:0]
		}
		for i, c := range r.ConfigResources {
			if i == 0 || c.Type != r.ConfigResources[i-1].Type {
				flush()
				fmt.Fprintf(&b, " type %d:", c.Type)
			}
			if strings.HasSuffix(c.Name, run) { // names from other runs and systems vary
				names = append(names, strings.TrimSuffix(c.Name, run))
			}
		}
		flush()
	default:
		fmt.Fprintf(&b, "%T", resp)
	}
	return b.String(), m.String()
}

func str(s *string) string {
	if s == nil {
		return "null"
	}
	return *s
}
