// The OpenAPI 3.0 description of the daemon's HTTP API. Kept by hand next to the handlers
// (api.cc); api_test.cc checks that every route it serves is described here.
#include "server/http/api.h"

namespace baton::server {

std::string_view OpenApiJson() {
  static constexpr std::string_view kDocument = R"json({
  "openapi": "3.0.3",
  "info": {
    "title": "baton scheduling daemon",
    "version": "1",
    "description": "Submit, inspect and cancel GPU training jobs; administer nodes. Authenticate with 'Authorization: Bearer <token>'. Tenants see only their own jobs; admins see all. Every error, including 404/405/413 and malformed requests, has the one body shape of components.schemas.Error: {\"error\": {\"code\", \"message\", \"field\"}}. Who may call what, and the auth file's format: docs/auth.md. A request is routed, authenticated and authorised before any of its body is read; bodies (Content-Length or chunked) are limited to 1 MiB by default (413). Duplicate JSON or YAML keys are refused (400)."
  },
  "servers": [{"url": "/"}],
  "security": [{"bearer": []}],
  "paths": {
    "/api/v1/jobs": {
      "post": {
        "summary": "Submit a job",
        "description": "Durable when it returns 201. Repeating a request with the same Idempotency-Key (per tenant) returns the original job with 200 and creates nothing; reusing a key for a different spec is 409. Admission: a job that can never run on the daemon's cluster is refused with 400 naming the field: more GPUs than the cluster (or than its GPUs of gpu_type) ('gpus'), an unknown GPU type or one the cluster lacks ('gpu_type'), more GPUs per node than its largest node ('gpus_per_node'), a topology level the fabric lacks or whose largest domain holds fewer GPUs than the job ('topology.required'), CPU, memory or an extended resource no node has enough of for one task ('cpu_milli', 'memory_mib', 'extended.NAME'), or an extended resource no node declares ('extended.NAME').",
        "operationId": "submitJob",
        "parameters": [{"name": "Idempotency-Key", "in": "header", "required": false,
                        "schema": {"type": "string", "minLength": 1, "maxLength": 255}}],
        "requestBody": {"required": true, "content": {
          "application/json": {"schema": {"$ref": "#/components/schemas/JobSpec"}},
          "application/yaml": {"schema": {"$ref": "#/components/schemas/JobSpec"}}}},
        "responses": {
          "201": {"description": "Created", "headers": {"Location": {"schema": {"type": "string"}}},
                  "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Job"}}}},
          "200": {"description": "Idempotent replay: the original job",
                  "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Job"}}}},
          "400": {"$ref": "#/components/responses/Error"},
          "401": {"$ref": "#/components/responses/Error"},
          "403": {"$ref": "#/components/responses/Error"},
          "409": {"$ref": "#/components/responses/Error"},
          "413": {"$ref": "#/components/responses/Error"},
          "415": {"$ref": "#/components/responses/Error"},
          "503": {"$ref": "#/components/responses/Error"}
        }
      },
      "get": {
        "summary": "List jobs, oldest first",
        "operationId": "listJobs",
        "parameters": [
          {"name": "tenant", "in": "query", "schema": {"type": "string"},
           "description": "Admins: any tenant. Tenants: only their own (the default)."},
          {"name": "state", "in": "query", "schema": {"$ref": "#/components/schemas/JobState"}},
          {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}},
          {"name": "cursor", "in": "query", "schema": {"type": "string"},
           "description": "next_cursor from the previous page"}
        ],
        "responses": {
          "200": {"description": "A page of jobs", "content": {"application/json": {"schema": {
            "type": "object", "required": ["jobs", "next_cursor"],
            "properties": {"jobs": {"type": "array", "items": {"$ref": "#/components/schemas/Job"}},
                           "next_cursor": {"type": "string", "nullable": true}}}}}},
          "400": {"$ref": "#/components/responses/Error"},
          "401": {"$ref": "#/components/responses/Error"},
          "403": {"$ref": "#/components/responses/Error"}
        }
      }
    },
    "/api/v1/jobs/{id}": {
      "parameters": [{"$ref": "#/components/parameters/JobId"}],
      "get": {
        "summary": "Get a job",
        "operationId": "getJob",
        "responses": {
          "200": {"description": "The job", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Job"}}}},
          "401": {"$ref": "#/components/responses/Error"},
          "404": {"$ref": "#/components/responses/Error"}
        }
      },
      "delete": {
        "summary": "Cancel a job (same as POST /api/v1/jobs/{id}:cancel)",
        "operationId": "deleteJob",
        "responses": {
          "202": {"description": "Cancelled (was queued) or cancelling (was running)",
                  "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Job"}}}},
          "200": {"description": "Already cancelled or cancelling",
                  "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Job"}}}},
          "401": {"$ref": "#/components/responses/Error"},
          "404": {"$ref": "#/components/responses/Error"},
          "409": {"$ref": "#/components/responses/Error"}
        }
      }
    },
    "/api/v1/jobs/{id}:cancel": {
      "parameters": [{"$ref": "#/components/parameters/JobId"}],
      "post": {
        "summary": "Cancel a job. Takes no body; answers at once.",
        "operationId": "cancelJob",
        "responses": {
          "202": {"description": "Cancelled (was queued) or cancelling (was running)",
                  "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Job"}}}},
          "200": {"description": "Already cancelled or cancelling",
                  "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Job"}}}},
          "401": {"$ref": "#/components/responses/Error"},
          "404": {"$ref": "#/components/responses/Error"},
          "409": {"$ref": "#/components/responses/Error"}
        }
      }
    },
    "/api/v1/jobs/{id}/events": {
      "parameters": [{"$ref": "#/components/parameters/JobId"}],
      "get": {
        "summary": "A job's history (queued, placed, preempted, failed, restarted, cancelled...), oldest first",
        "operationId": "jobEvents",
        "responses": {
          "200": {"description": "Events", "content": {"application/json": {"schema": {
            "type": "object", "required": ["job", "events"],
            "properties": {"job": {"type": "integer", "format": "int64"},
                           "events": {"type": "array", "items": {"$ref": "#/components/schemas/JobEvent"}}}}}}},
          "401": {"$ref": "#/components/responses/Error"},
          "404": {"$ref": "#/components/responses/Error"}
        }
      }
    },
    "/api/v1/jobs/{id}/placement": {
      "parameters": [{"$ref": "#/components/parameters/JobId"}],
      "get": {
        "summary": "Where a job runs (or last ran) and what that costs: its GPUs, the level they span, the level a compact placement of as many GPUs would span and, for a job with a plan, the planner's step-time breakdown on its placement and on the compact one with the slowdown between them. Another tenant's job is 404.",
        "operationId": "jobPlacement",
        "responses": {
          "200": {"description": "Placement", "content": {"application/json": {"schema": {
            "type": "object", "required": ["job", "placed", "plan"],
            "properties": {"job": {"type": "integer", "format": "int64"}, "placed": {"type": "boolean"},
                           "source": {"type": "string", "enum": ["scheduler", "stored"]},
                           "gpus": {"type": "integer"}, "level": {"type": "string"}, "compact_level": {"type": "string"},
                           "nodes": {"type": "array", "items": {"type": "object"}},
                           "plan": {"type": "object", "nullable": true,
                                    "properties": {"model": {"type": "string"}, "plan": {"type": "object"},
                                                   "estimate": {"type": "object"}, "compact_estimate": {"type": "object"},
                                                   "slowdown": {"type": "number", "nullable": true}}},
                           "plan_note": {"type": "string"}}}}}},
          "401": {"$ref": "#/components/responses/Error"},
          "404": {"$ref": "#/components/responses/Error"}
        }
      }
    },
    "/api/v1/tenants": {
      "get": {
        "summary": "Per tenant: quota, guarantee and weight from the scheduler config, GPUs in use, GPUs queued and fair share (weighted max-min share of the cluster given every tenant's demand and quota), now and sampled every interval_s over the last capacity samples. A tenant sees only itself.",
        "operationId": "tenants",
        "responses": {
          "200": {"description": "Tenants", "content": {"application/json": {"schema": {
            "type": "object", "required": ["interval_s", "capacity", "cluster_gpus", "tenants", "history"],
            "properties": {"interval_s": {"type": "number"}, "capacity": {"type": "integer"},
                           "cluster_gpus": {"type": "integer"}, "pending_truncated": {"type": "boolean"},
                           "tenants": {"type": "array", "items": {"type": "object"}},
                           "history": {"type": "object"}}}}}},
          "401": {"$ref": "#/components/responses/Error"}
        }
      }
    },
    "/api/v1/health": {
      "get": {
        "summary": "The health rules, and every node's verdict with the rule conditions behind it, its latest telemetry values, and its leaf, rack and NVLink domain. Admin only.",
        "operationId": "health",
        "responses": {
          "200": {"description": "Health", "content": {"application/json": {"schema": {
            "type": "object", "required": ["rules", "nodes"],
            "properties": {"rules": {"type": "array", "items": {"type": "object"}},
                           "nodes": {"type": "array", "items": {"type": "object"}}}}}}},
          "401": {"$ref": "#/components/responses/Error"},
          "403": {"$ref": "#/components/responses/Error"}
        }
      }
    },
    "/api/v1/nodes": {
      "get": {
        "summary": "Every node of the cluster with its health (from telemetry and admin state), allocation and jobs; without a scheduler, only nodes with an administrative state. Admin only.",
        "operationId": "listNodes",
        "responses": {
          "200": {"description": "Nodes", "content": {"application/json": {"schema": {
            "type": "object", "required": ["nodes"],
            "properties": {"nodes": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}}}}}}},
          "401": {"$ref": "#/components/responses/Error"},
          "403": {"$ref": "#/components/responses/Error"}
        }
      }
    },
    "/api/v1/nodes/{node}": {
      "parameters": [{"$ref": "#/components/parameters/NodeName"}],
      "get": {
        "summary": "One node: health, active health rules, allocation, jobs, admin state. Admin only.",
        "operationId": "getNode",
        "responses": {
          "200": {"description": "The node", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Node"}}}},
          "401": {"$ref": "#/components/responses/Error"},
          "403": {"$ref": "#/components/responses/Error"},
          "404": {"$ref": "#/components/responses/Error"}
        }
      }
    },
    "/api/v1/nodes/{node}/telemetry": {
      "parameters": [{"$ref": "#/components/parameters/NodeName"}],
      "post": {
        "summary": "One health sample of a node: DCGM field name -> number (the worst over its GPUs), e.g. {\"DCGM_FI_DEV_XID_ERRORS\": 79}. Fed to the health rules; the node's condition reaches the scheduler at its next cycle. Admin only.",
        "operationId": "postNodeTelemetry",
        "requestBody": {"required": true, "content": {"application/json": {"schema": {
          "type": "object", "minProperties": 1, "additionalProperties": {"type": "number"}}}}},
        "responses": {
          "202": {"description": "Accepted", "content": {"application/json": {"schema": {
            "type": "object", "properties": {"node": {"type": "string"}, "fields": {"type": "integer"}}}}}},
          "400": {"$ref": "#/components/responses/Error"},
          "401": {"$ref": "#/components/responses/Error"},
          "403": {"$ref": "#/components/responses/Error"},
          "404": {"$ref": "#/components/responses/Error"},
          "503": {"$ref": "#/components/responses/Error"}
        }
      }
    },
    "/api/v1/telemetry/dcgm": {
      "post": {
        "summary": "A scrape of NVIDIA's DCGM exporter (Prometheus text). DCGM_FI_DEV_XID_ERRORS, DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, DCGM_FI_DEV_PCIE_REPLAY_COUNTER, DCGM_FI_DEV_GPU_TEMP and the NVLink error counters are grouped by their Hostname label (worst value over the gpu labels) and fed to the health rules. Admin only.",
        "operationId": "postDcgmScrape",
        "requestBody": {"required": true, "content": {"text/plain": {"schema": {"type": "string"}}}},
        "responses": {
          "202": {"description": "Accepted", "content": {"application/json": {"schema": {
            "type": "object", "properties": {
              "nodes": {"type": "array", "items": {"type": "string"}},
              "unknown_nodes": {"type": "array", "items": {"type": "string"}, "description": "Hostnames not in the cluster (ignored)"},
              "samples": {"type": "integer"}, "skipped_lines": {"type": "integer"}}}}}},
          "400": {"$ref": "#/components/responses/Error"},
          "401": {"$ref": "#/components/responses/Error"},
          "403": {"$ref": "#/components/responses/Error"},
          "503": {"$ref": "#/components/responses/Error"}
        }
      }
    },
    "/api/v1/topology": {
      "get": {
        "summary": "The cluster the scheduler runs: a summary and GPU totals",
        "operationId": "getTopology",
        "responses": {
          "200": {"description": "Topology", "content": {"application/json": {"schema": {
            "type": "object", "properties": {"summary": {"type": "string"}, "nodes": {"type": "integer"},
                                             "gpus": {"type": "integer"}, "gpus_allocated": {"type": "integer"}}}}}},
          "401": {"$ref": "#/components/responses/Error"},
          "503": {"$ref": "#/components/responses/Error"}
        }
      }
    },
    "/api/v1/plan/estimate": {
      "post": {
        "summary": "Estimate one parallel plan of a model on N GPUs of this cluster",
        "description": "The stack it assumed (stack: every training stack setting with its value), the planner's step time, its breakdown (compute, recompute, TP/CP/EP/PP/DP communication, bubble, optimizer), MFU, memory per GPU, checkpoint size and interval, time/GPU-hours/cost to train when training.tokens is given, and band: the cross-validated relative error of the daemon's profile around this estimate (step_s and mfu as [low, high]), extrapolated and why when the job is outside the validated envelope. An infeasible plan is a 200 answer with estimate.feasible false and a reason. Nothing is stored.",
        "operationId": "estimatePlan",
        "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/PlanRequest"}}}},
        "responses": {
          "200": {"description": "The estimate", "content": {"application/json": {"schema": {"type": "object"}}}},
          "400": {"$ref": "#/components/responses/Error"},
          "401": {"$ref": "#/components/responses/Error"},
          "415": {"$ref": "#/components/responses/Error"},
          "503": {"$ref": "#/components/responses/Error"}
        }
      }
    },
    "/api/v1/plan/search": {
      "post": {
        "summary": "Search every parallel plan of a model on N GPUs of this cluster; the top plans",
        "description": "The default space is every tp (powers of two to 64), pp, cp, ep, micro-batch, virtual stage, recompute, sequence-parallel, ZeRO and overlap choice; 'search' restricts it. Answers with the top plans and their estimates (each with step_s_band and mfu_band, and beyond_envelope when its MFU is above what validated runs of this model size reached: mfu_reached), the job's band, the space size and the rejected plans by reason.",
        "operationId": "searchPlans",
        "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/PlanRequest"}}}},
        "responses": {
          "200": {"description": "The top plans", "content": {"application/json": {"schema": {"type": "object"}}}},
          "400": {"$ref": "#/components/responses/Error"},
          "401": {"$ref": "#/components/responses/Error"},
          "415": {"$ref": "#/components/responses/Error"},
          "503": {"$ref": "#/components/responses/Error"}
        }
      }
    },
    "/api/v1/sites": {
      "get": {
        "summary": "A federation broker's sites: health, jobs in flight, the last what-if answer",
        "operationId": "listSites",
        "responses": {
          "200": {"description": "The sites", "content": {"application/json": {"schema": {"type": "object", "properties": {
            "sites": {"type": "array", "items": {"type": "object", "properties": {
              "name": {"type": "string"}, "url": {"type": "string"}, "regions": {"type": "array", "items": {"type": "string"}},
              "healthy": {"type": "boolean"}, "last_ok": {"type": "string", "format": "date-time"},
              "last_error": {"type": "string"}, "jobs_in_flight": {"type": "integer"},
              "last_answer": {"type": "object", "properties": {"at": {"type": "string", "format": "date-time"}, "summary": {"type": "string"}}}}}}}}}}},
          "401": {"$ref": "#/components/responses/Error"},
          "404": {"$ref": "#/components/responses/Error"}
        }
      }
    },
    "/api/v1/whatif": {
      "post": {
        "summary": "What the scheduler would do with a job submitted now; stores and changes nothing",
        "description": "Takes a submit's job spec (same checks). Answers from the scheduler's own reservation logic on its live state (Scheduler::WhatIf): queue_position, waiting_kind, estimated_start (absent when unknown), gpu_type and placement it would start on, step_time_s, the planner's step time on that placement for a job with a plan, and the site's free_gpus and total_gpus now (a broker's least-loaded routing).",
        "operationId": "whatIf",
        "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/JobSpec"}}, "application/yaml": {"schema": {"$ref": "#/components/schemas/JobSpec"}}}},
        "responses": {
          "200": {"description": "The answer", "content": {"application/json": {"schema": {"type": "object", "required": ["queue_position", "waiting_kind"], "properties": {
            "queue_position": {"type": "integer", "minimum": 1},
            "waiting_kind": {"type": "string"},
            "estimated_start": {"type": "string", "format": "date-time"},
            "gpu_type": {"type": "string"},
            "placement": {"$ref": "#/components/schemas/Placement"},
            "step_time_s": {"type": "number"},
            "free_gpus": {"type": "integer", "minimum": 0},
            "total_gpus": {"type": "integer", "minimum": 0}}}}}},
          "400": {"$ref": "#/components/responses/Error"},
          "401": {"$ref": "#/components/responses/Error"},
          "403": {"$ref": "#/components/responses/Error"},
          "415": {"$ref": "#/components/responses/Error"},
          "503": {"$ref": "#/components/responses/Error"}
        }
      }
    },
    "/api/v1/nodes/{node}:{action}": {
      "parameters": [
        {"name": "node", "in": "path", "required": true, "schema": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"}},
        {"name": "action", "in": "path", "required": true, "schema": {"type": "string", "enum": ["cordon", "drain", "uncordon"]}}
      ],
      "post": {
        "summary": "Cordon or drain (no new work lands there; running jobs keep going) or uncordon a node. Admin only.",
        "operationId": "setNodeAdmin",
        "requestBody": {"required": false, "content": {"application/json": {"schema": {
          "type": "object", "additionalProperties": false,
          "properties": {"reason": {"type": "string", "maxLength": 1024}}}}}},
        "responses": {
          "200": {"description": "The node's new state as stored, updated_at included (404: a node the scheduler's cluster does not have)", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/NodeAdmin"}}}},
          "400": {"$ref": "#/components/responses/Error"},
          "401": {"$ref": "#/components/responses/Error"},
          "403": {"$ref": "#/components/responses/Error"},
          "404": {"$ref": "#/components/responses/Error"}
        }
      }
    },
    "/api/v1/whoami": {
      "get": {
        "summary": "The caller as the daemon authenticated it: token name, role and tenant",
        "operationId": "whoami",
        "responses": {
          "200": {"description": "The caller", "content": {"application/json": {"schema": {
            "type": "object", "properties": {"name": {"type": "string"}, "role": {"type": "string", "enum": ["admin", "tenant"]},
                                             "tenant": {"type": "string"}}}}}},
          "401": {"$ref": "#/components/responses/Error"}
        }
      }
    },
    "/api/v1/cluster": {
      "get": {
        "summary": "Every node and GPU and the job holding it, filtered for the caller",
        "description": "What the dashboard's cluster view draws. Each GPU is the id of the job holding it, 0 when free, or -1 when another tenant's job holds it (admins see every id). jobs maps each visible id to its tenant.",
        "operationId": "getCluster",
        "responses": {
          "200": {"description": "The cluster", "content": {"application/json": {"schema": {
            "type": "object", "properties": {
              "name": {"type": "string"}, "gpus": {"type": "integer"}, "gpus_allocated": {"type": "integer"},
              "nodes": {"type": "array", "items": {"type": "object", "properties": {
                "name": {"type": "string"}, "path": {"type": "string"}, "domain": {"type": "string"},
                "health": {"type": "string"}, "admin": {"type": "string"},
                "gpus": {"type": "array", "items": {"type": "integer"}}}}},
              "jobs": {"type": "object", "additionalProperties": {"type": "object", "properties": {"tenant": {"type": "string"}}}}}}}}},
          "401": {"$ref": "#/components/responses/Error"},
          "503": {"$ref": "#/components/responses/Error"}
        }
      }
    },
    "/api/v1/stream": {
      "get": {
        "summary": "Server-sent events: 'event: change' whenever the scheduler's state changes",
        "description": "text/event-stream. The state is checked every 200 ms; a comment line every 15 s keeps proxies from closing the stream, which ends after 45 s (reconnect at once, then read again). At most 16 streams are open at a time; more get 503.",
        "operationId": "stream",
        "responses": {
          "200": {"description": "An event stream", "content": {"text/event-stream": {"schema": {"type": "string"}}}},
          "401": {"$ref": "#/components/responses/Error"},
          "503": {"$ref": "#/components/responses/Error"}
        }
      }
    },
    "/api/v1/openapi.json": {
      "get": {"summary": "This document", "operationId": "openapi", "security": [],
              "responses": {"200": {"description": "OpenAPI 3 document", "content": {"application/json": {}}}}}
    },
    "/healthz": {
      "get": {"summary": "Liveness: the daemon serves and its store answers", "operationId": "healthz", "security": [],
              "responses": {"200": {"description": "Healthy", "content": {"application/json": {"schema": {
                "type": "object", "properties": {"status": {"type": "string", "enum": ["ok"]},
                  "role": {"type": "string", "enum": ["leader", "standby"], "description": "Replicas on PostgreSQL only (docs/operations.md)"},
                  "epoch": {"type": "integer", "description": "The leader lease epoch: the leader's own, or the one a standby last saw"},
                  "leader": {"type": "string", "nullable": true, "description": "A standby: the URL of the leader, null while none holds a live lease"}}}}}},
                            "503": {"$ref": "#/components/responses/Error"}}}
    },
    "/metrics": {
      "get": {"summary": "Prometheus metrics, text format 0.0.4. Admin only: labels name tenants.", "operationId": "metrics",
              "responses": {"200": {"description": "Metrics", "content": {"text/plain; version=0.0.4": {"schema": {"type": "string"}}}},
                            "401": {"$ref": "#/components/responses/Error"},
                            "403": {"$ref": "#/components/responses/Error"}}}
    }
  },
  "components": {
    "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
    "parameters": {
      "JobId": {"name": "id", "in": "path", "required": true, "schema": {"type": "integer", "format": "int64", "minimum": 1}},
      "NodeName": {"name": "node", "in": "path", "required": true, "schema": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"}}
    },
    "responses": {
      "Error": {"description": "An error, in the one shape every endpoint uses (also for 404 no such endpoint, 405 method not allowed, 413 body too large, 400 malformed request)", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    },
    "schemas": {
      "PlanRequest": {
        "type": "object", "required": ["model", "gpus"], "additionalProperties": false,
        "properties": {
          "model": {"oneOf": [{"type": "string", "description": "catalogue name: gpt3-175b, llama3-405b, megatron-1t, mixtral-8x7b, ..."},
                              {"type": "object", "description": "layers, hidden, heads, kv_heads, ffn, ffn_kind, vocab, seq, tied_embeddings, moe {...}; 'base' starts from a catalogue model"}]},
          "gpus": {"type": "integer", "minimum": 1},
          "training": {"type": "object", "additionalProperties": false, "properties": {
            "global_batch": {"type": "integer", "minimum": 1}, "global_batch_tokens": {"type": "number"},
            "dtype": {"type": "string", "enum": ["bf16", "fp16", "fp8"]}, "tokens": {"type": "number", "minimum": 0},
            "price_per_gpu_hour": {"type": "number", "minimum": 0}, "flash_attention": {"type": "boolean"},
            "grads": {"type": "string", "enum": ["fp32", "bf16", "bf16-adam"]},
            "fp8_recipe": {"type": "string", "enum": ["delayed", "tensorwise", "rowwise", "jax"], "description": "fp8 runs only"},
            "compiled": {"oneOf": [{"type": "boolean"}, {"type": "string", "enum": ["yes", "no"]}]},
            "cp_attention": {"type": "string", "enum": ["ring", "torch", "allgather"]}, "tp_impl": {"type": "string", "enum": ["megatron", "dtensor"]}, "grad_accum": {"type": "string", "enum": ["fused", "fp32", "autograd"]}, "attn_kernel": {"type": "string", "enum": ["flash", "cudnn", "flash1", "flash3", "triton", "xformers", "math"]}, "loss": {"type": "string", "enum": ["unfused", "fused"]},
            "async_tp": {"oneOf": [{"type": "boolean"}, {"type": "string", "enum": ["no", "yes"]}]}}},
          "plan": {"type": "object", "description": "estimate only; dp defaults to gpus / (tp*pp*cp)", "additionalProperties": false, "properties": {
            "tp": {"type": "integer"}, "pp": {"type": "integer"}, "dp": {"type": "integer"}, "cp": {"type": "integer"},
            "ep": {"type": "integer"}, "mbs": {"type": "integer"}, "vp": {"type": "integer"},
            "recompute": {"type": "string", "enum": ["none", "selective", "full", "ops", "mlp"]}, "sequence_parallel": {"type": "boolean"},
            "zero": {"type": "integer", "minimum": 0, "maximum": 3}, "overlap_dp_comm": {"type": "boolean"},
            "fsdp_group": {"type": "integer", "minimum": 0, "description": "zero 3 only: HSDP, parameters sharded over groups of this many dp x cp ranks and replicated across the groups; 0 (default) shards over all of them"},
            "uneven_pp": {"type": "boolean"}, "order": {"type": "string", "enum": ["tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp"]}}},
          "search": {"type": "object", "description": "search only; lists restrict the default space", "additionalProperties": false, "properties": {
            "tp": {"type": "array", "items": {"type": "integer"}}, "pp": {"type": "array", "items": {"type": "integer"}},
            "cp": {"type": "array", "items": {"type": "integer"}}, "ep": {"type": "array", "items": {"type": "integer"}},
            "mbs": {"type": "array", "items": {"type": "integer"}}, "vp": {"type": "array", "items": {"type": "integer"}},
            "zero": {"type": "array", "items": {"type": "integer"}},
            "recompute": {"type": "array", "items": {"type": "string", "enum": ["none", "selective", "full", "ops", "mlp"]}},
            "top": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10},
            "objective": {"type": "string", "enum": ["time", "mfu"], "default": "time"}}}
        }
      },
      "Error": {
        "type": "object", "required": ["error"],
        "properties": {"error": {"type": "object", "required": ["code", "message"], "properties": {
          "code": {"type": "string", "example": "INVALID_ARGUMENT", "enum": ["INVALID_ARGUMENT", "UNAUTHENTICATED", "PERMISSION_DENIED", "NOT_FOUND", "METHOD_NOT_ALLOWED", "ALREADY_EXISTS", "FAILED_PRECONDITION", "IDEMPOTENCY_KEY_REUSED", "PAYLOAD_TOO_LARGE", "URI_TOO_LONG", "UNSUPPORTED_MEDIA_TYPE", "RESOURCE_EXHAUSTED", "REQUEST_TIMEOUT", "INTERNAL", "UNAVAILABLE"]},
          "message": {"type": "string", "example": "field 'gpus': must be an integer between 1 and 1000000, got 0"},
          "field": {"type": "string", "description": "The request field at fault (a dotted path, a header or a query parameter)", "example": "gpus"}}}}
      },
      "JobState": {"type": "string", "enum": ["queued", "running", "cancelling", "succeeded", "failed", "cancelled"]},
      "JobSpec": {
        "type": "object", "required": ["name"], "additionalProperties": false,
        "properties": {
          "name": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"},
          "tenant": {"type": "string", "description": "Defaults to the caller's tenant; only admins may name another"},
          "gpus": {"type": "integer", "minimum": 0, "maximum": 1000000, "description": "Required, except for an elastic job (then its starting size, default elastic.min_gpus). 0 only for a CPU-only job (one task asking for cpu_milli, memory_mib or extended resources)"},
          "gpus_per_node": {"type": "integer", "minimum": 1, "maximum": 64, "description": "Must divide gpus"},
          "gpu_milli": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "A share of one GPU in thousandths (needs gpus: 1; 1000 is the whole GPU)"},
          "cpu_milli": {"type": "integer", "minimum": 0, "maximum": 1099511627776, "description": "CPU per task in thousandths of a core"},
          "memory_mib": {"type": "integer", "minimum": 0, "maximum": 1099511627776, "description": "Memory per task in MiB"},
          "extended": {"type": "object", "maxProperties": 8, "description": "Named extended resources per task, as the cluster's node shapes declare them (e.g. rdma_nic, nvme_gb). 400 naming 'extended.NAME' for a name no node has or an amount above every node's", "propertyNames": {"pattern": "^[a-z][a-z0-9_./-]{0,62}$"}, "additionalProperties": {"type": "integer", "minimum": 0, "maximum": 1125899906842624}, "example": {"rdma_nic": 1}},
          "gpu_type": {"type": "string", "example": "H100-SXM"},
          "priority": {"type": "integer", "minimum": -1000, "maximum": 1000, "default": 0},
          "preemptible": {"type": "boolean", "default": true},
          "grace_period_s": {"type": "number", "minimum": 0, "maximum": 86400, "default": 30},
          "estimated_runtime_s": {"type": "number", "minimum": 0, "maximum": 31536000, "default": 0},
          "command": {"type": "array", "maxItems": 256, "items": {"type": "string", "maxLength": 4096}},
          "topology": {"type": "object", "additionalProperties": false, "properties": {
            "required": {"$ref": "#/components/schemas/TopologyLevel"},
            "preferred": {"$ref": "#/components/schemas/TopologyLevel"}}},
          "plan": {"$ref": "#/components/schemas/JobPlan"},
          "stage": {"type": "array", "maxItems": 64, "description": "Inputs to bring to the site before the job starts (the federation broker fills it from its routing plan; the local executor's stage-command copies each one)",
            "items": {"type": "object", "required": ["kind", "name", "from"], "additionalProperties": false, "properties": {
              "kind": {"type": "string", "enum": ["dataset", "checkpoint"]},
              "name": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"},
              "from": {"type": "string", "description": "The site holding it"},
              "size_gib": {"type": "number", "minimum": 0}}}},
          "federation": {"type": "object", "additionalProperties": false, "description": "What the federation broker (baton federate) routes the job by; a site stores it unread",
            "properties": {
              "datasets": {"type": "array", "maxItems": 64, "items": {"type": "string"}},
              "home_site": {"type": "string"},
              "require_regions": {"type": "array", "maxItems": 64, "items": {"type": "string"}},
              "exclude_regions": {"type": "array", "maxItems": 64, "items": {"type": "string"}},
              "deadline": {"type": "string", "format": "date-time", "example": "2026-12-01T18:00:00Z"},
              "checkpoint_gib": {"type": "number", "minimum": 0},
              "lease_s": {"type": "integer", "minimum": 1, "maximum": 86400, "description": "Set by a broker only: the site runs the job only while the broker renews this lease (each GET of the job by the broker renews it); a lapsed lease stops the job and holds it until the broker renews or cancels it"}}},
          "elastic": {"type": "object", "required": ["min_gpus", "max_gpus"], "additionalProperties": false, "description": "An elastic job: it starts at gpus, grows toward max_gpus into idle GPUs and shrinks toward min_gpus instead of being preempted; each resize restarts it from its checkpoint at the new size (a new attempt). Whole GPUs only: not with gpus_per_node, gpu_milli, cpu_milli, memory_mib, extended or plan",
            "properties": {
              "min_gpus": {"type": "integer", "minimum": 1, "maximum": 1000000},
              "max_gpus": {"type": "integer", "minimum": 1, "maximum": 1000000, "description": ">= min_gpus"},
              "step_gpus": {"type": "integer", "minimum": 1, "maximum": 1000000, "description": "The data-parallel unit: every size is a multiple of it. Left out: 1 when max_gpus fits on one node, else the job's GPUs per node at its starting size (a whole node for a gang larger than a node)"}}}
        }
      },
      "JobPlan": {
        "type": "object", "required": ["model"], "additionalProperties": false,
        "description": "The job's training plan, flat: the model with PlanRequest's plan and training fields side by side. The placements of a job with a plan are ranked by the planner's predicted slowdown (the 'planner' score) and its 'placed' event states it. tp*pp*dp*cp must be the job's gpus; dp defaults to gpus / (tp*pp*cp). With no plan field it runs the planner's best plan for its gpus (then model must be a catalogue name and no training field is allowed). A plan that does not fit on the daemon's cluster (out of memory, or no feasible plan at all) is rejected with 400, field 'plan'.",
        "example": {"model": "llama3-70b", "tp": 8, "pp": 4, "recompute": "selective", "sequence_parallel": true, "zero": 1, "global_batch": 512},
        "properties": {
          "model": {"oneOf": [{"type": "string", "description": "catalogue name: gpt3-175b, llama3-70b, llama3-405b, mixtral-8x7b, ..."},
                              {"type": "object", "description": "inline model fields, as PlanRequest.model"}]},
          "tp": {"type": "integer"}, "pp": {"type": "integer"}, "dp": {"type": "integer"}, "cp": {"type": "integer"},
          "ep": {"type": "integer"}, "mbs": {"type": "integer"}, "vp": {"type": "integer"},
          "recompute": {"type": "string", "enum": ["none", "selective", "full", "ops", "mlp"]}, "sequence_parallel": {"type": "boolean"},
          "zero": {"type": "integer", "minimum": 0, "maximum": 3}, "overlap_dp_comm": {"type": "boolean"},
            "fsdp_group": {"type": "integer", "minimum": 0, "description": "zero 3 only: HSDP, parameters sharded over groups of this many dp x cp ranks and replicated across the groups; 0 (default) shards over all of them"},
          "uneven_pp": {"type": "boolean"}, "order": {"type": "string", "enum": ["tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp"]},
          "global_batch": {"type": "integer", "minimum": 1}, "global_batch_tokens": {"type": "number"},
          "dtype": {"type": "string", "enum": ["bf16", "fp16", "fp8"]}, "tokens": {"type": "number", "minimum": 0},
          "price_per_gpu_hour": {"type": "number", "minimum": 0}, "flash_attention": {"type": "boolean"},
          "grads": {"type": "string", "enum": ["fp32", "bf16", "bf16-adam"]},
          "fp8_recipe": {"type": "string", "enum": ["delayed", "tensorwise", "rowwise", "jax"], "description": "fp8 runs only"},
          "compiled": {"oneOf": [{"type": "boolean"}, {"type": "string", "enum": ["yes", "no"]}]},
          "cp_attention": {"type": "string", "enum": ["ring", "torch", "allgather"]}, "tp_impl": {"type": "string", "enum": ["megatron", "dtensor"]}, "grad_accum": {"type": "string", "enum": ["fused", "fp32", "autograd"]}, "attn_kernel": {"type": "string", "enum": ["flash", "cudnn", "flash1", "flash3", "triton", "xformers", "math"]}, "loss": {"type": "string", "enum": ["unfused", "fused"]},
          "async_tp": {"oneOf": [{"type": "boolean"}, {"type": "string", "enum": ["no", "yes"]}]}}
      },
      "TopologyLevel": {"type": "string", "enum": ["node", "nvlink-domain", "leaf", "spine", "group", "core"]},
      "Job": {
        "type": "object", "required": ["id", "tenant", "name", "state", "attempts", "created_at", "updated_at", "spec"],
        "properties": {
          "id": {"type": "integer", "format": "int64"},
          "tenant": {"type": "string"},
          "name": {"type": "string"},
          "state": {"$ref": "#/components/schemas/JobState"},
          "attempts": {"type": "integer"},
          "created_at": {"type": "string", "format": "date-time"},
          "updated_at": {"type": "string", "format": "date-time"},
          "idempotency_key": {"type": "string"},
          "spec": {"$ref": "#/components/schemas/JobSpec"},
          "checkpoint": {"type": "object", "description": "The newest checkpoint the job reported (docs/jobs.md): where a restart resumes from", "properties": {"step": {"type": "integer", "format": "int64"}, "attempt": {"type": "integer"}, "time": {"type": "string", "format": "date-time"}, "bytes": {"type": "number"}}},
          "waiting_reason": {"type": "string", "description": "Pending jobs: why the scheduler has not placed it yet"},
          "queue_position": {"type": "integer", "minimum": 1, "description": "Pending jobs: 1-based place in the scheduler's queue order"},
          "estimated_start": {"type": "string", "format": "date-time", "description": "Pending jobs: when the scheduler's own reservation logic expects it to start if running jobs end at their estimates; absent when unknown (a job holding the GPUs it needs has no estimated_runtime)"},
          "waiting_kind": {"type": "string", "enum": ["starting", "quota", "fragmentation", "topology", "constraint", "health", "reservation", "priority", "capacity", "preempting", "backoff"], "description": "Pending jobs: the kind of thing it waits for"},
          "placement": {"$ref": "#/components/schemas/Placement"},
          "site": {"type": "string", "description": "A federation broker's job: the site it was dispatched to"},
          "site_job": {"type": "integer", "format": "int64", "description": "A federation broker's job: its id at that site"},
          "site_state": {"type": "string", "description": "A federation broker's job: its state as the site last reported it"}
        }
      },
      "Placement": {
        "type": "object", "description": "Where a placed job runs: nodes in rank order and their GPUs",
        "properties": {
          "nodes": {"type": "array", "items": {"type": "object", "properties": {
            "node": {"type": "string"}, "gpus": {"type": "array", "items": {"type": "integer"}}}}},
          "gpus": {"type": "integer"},
          "level": {"$ref": "#/components/schemas/TopologyLevel"}}
      },
      "Node": {
        "type": "object", "required": ["node", "admin"],
        "properties": {"node": {"type": "string"},
                       "health": {"type": "string", "enum": ["healthy", "suspect", "draining", "down"]},
                       "active_rules": {"type": "array", "items": {"type": "string"}},
                       "gpus": {"type": "integer"}, "gpus_allocated": {"type": "integer"},
                       "jobs": {"type": "array", "items": {"type": "integer", "format": "int64"}},
                       "admin": {"type": "string", "enum": ["active", "cordoned", "draining"]},
                       "reason": {"type": "string"}, "by": {"type": "string"},
                       "updated_at": {"type": "string", "format": "date-time"}}
      },
      "JobEvent": {
        "type": "object", "required": ["time", "kind", "message"],
        "properties": {"time": {"type": "string", "format": "date-time"},
                       "kind": {"type": "string", "example": "placed"},
                       "message": {"type": "string"}}
      },
      "NodeAdmin": {
        "type": "object", "required": ["node", "admin"],
        "properties": {"node": {"type": "string"},
                       "admin": {"type": "string", "enum": ["active", "cordoned", "draining"]},
                       "reason": {"type": "string"}, "by": {"type": "string"},
                       "updated_at": {"type": "string", "format": "date-time"}}
      }
    }
  }
}
)json";
  return kDocument;
}

}  // namespace baton::server
