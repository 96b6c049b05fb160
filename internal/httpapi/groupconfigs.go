package httpapi

import (
	"net/http"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/metadata"
)

// groupConfigsJSON is the body of POST /groups/{group}/configs: group configs to
// set (IncrementalAlterConfigs on the GROUP resource, as kafka-configs
// --entity-type groups does), such as a share group's share.auto.offset.reset or
// its dead-letter topic errors.deadletterqueue.topic.name.
type groupConfigsJSON struct {
	Configs map[string]string `json:"configs"`
}

type groupConfigsAnswer struct {
	Group   string            `json:"group"`
	Configs map[string]string `json:"configs"`
}

func (a *API) handleSetGroupConfigs(w http.ResponseWriter, r *http.Request) {
	group := r.PathValue("group")
	body, aerr := readBody(w, r, a.cfg.MaxBodyBytes)
	var req groupConfigsJSON
	if aerr == nil {
		aerr = decodeControl(body, &req)
	}
	if aerr == nil && len(req.Configs) == 0 {
		aerr = invalid("configs: name at least one group config")
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceType(metadata.ResourceGroup), group
	for k, v := range req.Configs {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v) // op 0: SET
		res.Configs = append(res.Configs, c)
	}
	alter.Resources = append(alter.Resources, res)
	resp, err := alter.RequestWith(r.Context(), a.adminCl)
	if err != nil {
		writeError(w, fromErr(err))
		return
	}
	if rr := resp.Resources[0]; rr.ErrorCode != 0 {
		msg := "altering the configs of group " + group
		if rr.ErrorMessage != nil {
			msg = *rr.ErrorMessage
		}
		writeError(w, fromKafka(rr.ErrorCode, msg))
		return
	}
	writeJSON(w, http.StatusOK, groupConfigsAnswer{group, req.Configs})
}
