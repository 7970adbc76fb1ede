package attribution

import "github.com/go-json-experiment/json"

// CreatedTaskID returns the task id when result (the raw "result" member of
// a tools/call answer) is a CreateTaskResult, in either shape:
//
//   - 2025-11-25 (answer to a tools/call with params.task):
//     {"task":{"taskId":"…","status":"working",…}}
//   - 2026-07-28 tasks extension (the server decides):
//     {"resultType":"task","taskId":"…","status":"working",…}
//
// ok is false for anything else, a CallToolResult included. Member names
// match exactly; a duplicate member makes result unparsable (not a task).
func CreatedTaskID(result []byte) (taskID string, ok bool) {
	var v struct {
		Task *struct {
			TaskID string `json:"taskId"`
		} `json:"task"`
		ResultType string `json:"resultType"`
		TaskID     string `json:"taskId"`
	}
	if err := json.Unmarshal(result, &v); err != nil {
		return "", false
	}
	switch {
	case v.ResultType == "task" && v.TaskID != "":
		return v.TaskID, true
	case v.ResultType == "" && v.Task != nil && v.Task.TaskID != "":
		return v.Task.TaskID, true
	}
	return "", false
}

// ParamsTaskID returns params.taskId of a tasks/get, tasks/result,
// tasks/update or tasks/cancel request (raw params), or ok false.
func ParamsTaskID(params []byte) (taskID string, ok bool) {
	var v struct {
		TaskID string `json:"taskId"`
	}
	if err := json.Unmarshal(params, &v); err != nil || v.TaskID == "" {
		return "", false
	}
	return v.TaskID, true
}
