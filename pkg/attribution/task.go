package attribution

import "github.com/go-json-experiment/json"

// CreatedTaskID returns result.task.taskId when result (the raw "result"
// member of a tools/call answer) is a CreateTaskResult, as a server answers
// a task-augmented tools/call: {"task":{"taskId":"…","status":"working",…}}.
// ok is false for anything else, including a CallToolResult. Member names
// match exactly; a duplicate name makes result unparsable (not a task).
func CreatedTaskID(result []byte) (taskID string, ok bool) {
	var v struct {
		Task *struct {
			TaskID string `json:"taskId"`
		} `json:"task"`
	}
	if err := json.Unmarshal(result, &v); err != nil || v.Task == nil || v.Task.TaskID == "" {
		return "", false
	}
	return v.Task.TaskID, true
}

// ParamsTaskID returns params.taskId of a tasks/get, tasks/result or
// tasks/cancel request (raw params), or ok false.
func ParamsTaskID(params []byte) (taskID string, ok bool) {
	var v struct {
		TaskID string `json:"taskId"`
	}
	if err := json.Unmarshal(params, &v); err != nil || v.TaskID == "" {
		return "", false
	}
	return v.TaskID, true
}
