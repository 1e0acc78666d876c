#include "api/openapi.h"

#include <rapidjson/document.h>
#include <rapidjson/pointer.h>
#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include "api/errors.h"

namespace sandrun::api {
namespace {

// The spec without its per-server parts (see OpenApiJson). Kept as one JSON text so that it
// reads like the document clients get; RapidJSON parses it and fills in the rest.
//
// Two choices matter to Open WebUI, which makes every operation parameter and every property of
// the request body a parameter the model fills in:
//  - The request schema offers the model only `language`, `code` and `stdin`. The rest of the
//    API (`limits`, `network`, `files`, `markdown`, ...) stays with the people who configure
//    the server, and `user`/`session` above all: the body wins over the headers, so a model
//    that could set them could pick another user's workspace.
//  - Identity comes from the X-Sandrun-User and X-Sandrun-Session headers that the tool server
//    connection sets from {{USER_ID}} and {{CHAT_ID}}. They are described under
//    components/parameters but deliberately not referenced by the operation, for the same
//    reason.
// The response's `limits` properties are filled in from config::LimitKeys().
// No `servers`: clients resolve /run against the URL the spec was fetched from, which is what
// a reverse-proxied deployment needs.
constexpr char kSpec[] = R"json({
  "openapi": "3.1.0",
  "info": {
    "title": "sandrun",
    "version": "1.0.0",
    "summary": "Runs Python and Bash code in a throw-away Linux sandbox.",
    "description": "sandrun runs code that a model wrote in an isolated, throw-away Linux sandbox and answers with its output and signed, time-limited download links for the files it wrote. Authenticate with `Authorization: Bearer <token>`. Identify the end user and the chat with the `X-Sandrun-User` and `X-Sandrun-Session` headers (in Open WebUI: connection headers set to `{{USER_ID}}` and `{{CHAT_ID}}`): runs with the same session share their files. Those headers are not operation parameters on purpose, so that a model never chooses them. This document describes the part of `POST /run` that a model should use; the full API (limits, input files, whole Markdown messages, several snippets) is in sandrun's DESIGN.md."
  },
  "paths": {
    "/run": {
      "post": {
        "operationId": "run_code",
        "summary": "Run Python or Bash code in a sandbox and get its output and files",
        "description": "Run code in a fresh, isolated Linux sandbox and get back what it printed and the files it wrote. Use it whenever a task needs a computation, data analysis, a chart, a file (CSV, XLSX, PNG, ...) or a check that code really works: run it instead of guessing results. Python 3 comes with numpy, pandas, matplotlib, scipy, openpyxl, pillow and requests; bash has the usual command-line tools. There is no internet access. Save files in the current directory: each new or changed file comes back with a download link, and files from earlier runs in the same chat are still there. Only printed output, saved files and what the program shows come back, so print what you need: a chart shown with plt.show() (or a figure still open at the end) is returned as an image, and the value of the last line, if it is an expression (a DataFrame, a path), is shown as in a notebook. The answer has status (ok, error, timeout, memory_limit, ...), exit_code, stdout, stderr, files [{name, url, mime}] and displays (what the program showed, in order: images with a file, tables as Markdown text). Show every image to the user as ![name](url), every table in displays as given, and link every other file as [name](url), copying the url exactly; never make up a link. If status is not ok, read stderr, fix the code and run it again.",
        "requestBody": {
          "required": true,
          "content": {
            "application/json": {
              "schema": {
                "type": "object",
                "required": ["language", "code"],
                "properties": {
                  "language": {
                    "type": "string",
                    "description": "The language of `code`: `python` for a Python 3 program, `bash` for shell commands (e.g. `pip install x`, `ls -l`)."
                  },
                  "code": {
                    "type": "string",
                    "description": "The complete program or shell script to run. It runs from a file in the working directory, not in an interactive session: print every result you want to see (the value of a last-line expression is shown too)."
                  },
                  "stdin": {
                    "type": "string",
                    "description": "Optional text for the program's standard input. Leave it out unless the program reads input."
                  }
                }
              }
            }
          }
        },
        "responses": {
          "200": {
            "description": "The run finished, whatever the program did: read `status`, `stdout`, `stderr` and `files`. With `Accept: application/x-ndjson` the answer streams while the code runs: one RunEvent per line, the last a `result` event holding this same RunResult (or an `error` event). A request refused before it ran is the plain JSON error either way.",
            "content": {
              "application/json": {"schema": {"$ref": "#/components/schemas/RunResult"}},
              "application/x-ndjson": {"schema": {"$ref": "#/components/schemas/RunEvent"}}
            }
          },
          "400": {"$ref": "#/components/responses/Error"},
          "401": {"$ref": "#/components/responses/Error"},
          "403": {"$ref": "#/components/responses/Error"},
          "409": {"$ref": "#/components/responses/Error"},
          "413": {"$ref": "#/components/responses/Error"},
          "415": {"$ref": "#/components/responses/Error"},
          "429": {"$ref": "#/components/responses/Error"},
          "500": {"$ref": "#/components/responses/Error"},
          "503": {"$ref": "#/components/responses/Error"}
        }
      }
    }
  },
  "security": [{"bearerAuth": []}],
  "components": {
    "securitySchemes": {
      "bearerAuth": {
        "type": "http",
        "scheme": "bearer",
        "description": "A token from the server's tokens_file. A token bound to a user (`user=NAME`, or a plain token: a user of its own) acts as that user only; a `front_end` token names users in X-Sandrun-User."
      }
    },
    "parameters": {
      "SandrunUser": {
        "name": "X-Sandrun-User",
        "in": "header",
        "required": false,
        "description": "The end user (quotas, download paths). Set by the client, e.g. Open WebUI's {{USER_ID}}; `anonymous` when absent. Only a front end's token may name users (403 user_forbidden otherwise); a body `user` that differs is refused (400 conflicting_fields).",
        "schema": {"type": "string", "minLength": 1, "maxLength": 256}
      },
      "SandrunSession": {
        "name": "X-Sandrun-Session",
        "in": "header",
        "required": false,
        "description": "A persistent workspace, e.g. Open WebUI's {{CHAT_ID}}: runs of one session see each other's files. Absent or empty: a fresh workspace.",
        "schema": {"type": "string", "maxLength": 256}
      }
    },
    "responses": {
      "Error": {
        "description": "The service could not run the code (not an error of the program): bad request (400), missing token (401), user, origin or network refused (403), session busy (409, with Retry-After), too large (413), body not application/json (415), rate-limited (429), sandbox failure (500), busy (503).",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
      }
    },
    "schemas": {
      "RunEvent": {
        "type": "object",
        "description": "One line of a streamed run (Accept: application/x-ndjson), in this order: `plan` (markdown and snippets), per step `step`, its `stdout`/`stderr` chunks as they come (coalesced, at most the run's output_bytes in all) and `step_end`; then a `display` per entry of the answer's displays and a `file` per entry of its files; last `result` (the plain answer), or `error` if the run failed after the stream began. `keepalive` may come in silences. Ignore unknown events and fields.",
        "required": ["event"],
        "properties": {
          "event": {
            "type": "string",
            "enum": ["plan", "step", "stdout", "stderr", "step_end", "display", "file", "result",
                     "error", "keepalive"]
          },
          "index": {"type": "integer", "description": "The step: the answer's snippets[].index (0 for a single `code`)."},
          "language": {"type": "string"},
          "text": {"type": "string", "description": "stdout/stderr: output as it came, UTF-8."},
          "status": {"type": "string", "description": "step_end: as snippets[].status."},
          "exit_code": {"type": "integer"},
          "plan": {"type": "array", "items": {"type": "object"}, "description": "The answer's plan."},
          "display": {"type": "object", "description": "An entry of the answer's displays."},
          "file": {"type": "object", "description": "An entry of the answer's files."},
          "result": {"$ref": "#/components/schemas/RunResult"},
          "error": {
            "type": "object",
            "description": "error: the run failed after the stream began.",
            "required": ["code", "message"],
            "properties": {"code": {"type": "string"}, "message": {"type": "string"}}
          }
        }
      },
      "RunResult": {
        "type": "object",
        "required": ["id", "status", "exit_code", "signal", "stdout", "stderr", "stdout_truncated",
                     "stderr_truncated", "files", "files_skipped", "usage", "limits"],
        "properties": {
          "id": {"type": "string", "description": "Run id, also in the server's logs."},
          "status": {
            "type": "string",
            "enum": ["ok", "error", "killed", "timeout", "memory_limit", "output_limit",
                     "file_limit", "sandbox_error"],
            "description": "ok: exit code 0. error: non-zero exit code. killed: a signal. timeout, memory_limit, output_limit: a limit stopped the run. file_limit: files too many or too large."
          },
          "exit_code": {"type": ["integer", "null"]},
          "signal": {"type": ["integer", "null"]},
          "stdout": {"type": "string"},
          "stderr": {"type": "string", "description": "Also carries sandrun's own notes, e.g. which limit stopped the run."},
          "stdout_truncated": {"type": "boolean", "description": "The head and tail were kept, with a marker line between."},
          "stderr_truncated": {"type": "boolean"},
          "files": {"type": "array", "items": {"$ref": "#/components/schemas/File"}},
          "files_skipped": {"type": "array", "items": {"$ref": "#/components/schemas/SkippedFile"}},
          "displays": {
            "type": "array",
            "description": "What the program showed, in order: each chart shown with plt.show() or left open, each image shown, display() calls and the last line's value when it is a table or an image.",
            "items": {"$ref": "#/components/schemas/Display"}
          },
          "snippets": {
            "type": "array",
            "description": "Per snippet or Markdown block, when the request had several.",
            "items": {"$ref": "#/components/schemas/Snippet"}
          },
          "plan": {
            "type": "array",
            "description": "With `markdown`: every code block found and whether it ran.",
            "items": {"$ref": "#/components/schemas/PlanEntry"}
          },
          "environment": {
            "type": "object",
            "description": "The prepared environment of the run's packages (request field `packages`, set by the server's admin or a plugin valve), or one that held every package of the message's pip install lines.",
            "required": ["id", "packages", "status", "build_ms"],
            "properties": {
              "id": {"type": "string"},
              "packages": {"type": "array", "items": {"type": "string"}},
              "status": {"type": "string", "enum": ["built", "cached", "failed"], "description": "failed: nothing ran; pip's output is in stderr."},
              "build_ms": {"type": "integer"}
            }
          },
          "usage": {
            "type": "object",
            "required": ["wall_ms", "cpu_ms", "max_rss_kb"],
            "properties": {
              "wall_ms": {"type": "integer"},
              "cpu_ms": {"type": "integer"},
              "max_rss_kb": {"type": "integer"},
              "net_rx_bytes": {"type": "integer", "description": "With the network: bytes of IP packets received."},
              "net_tx_bytes": {"type": "integer", "description": "With the network: bytes of IP packets sent."}
            }
          },
          "limits": {
            "type": "object",
            "description": "The limits in force for this run.",
            "properties": {}
          }
        }
      },
      "File": {
        "type": "object",
        "required": ["name", "path", "size", "mime", "sha256", "url", "expires_at"],
        "properties": {
          "name": {"type": "string"},
          "path": {"type": "string", "description": "Relative to the working directory."},
          "size": {"type": "integer", "minimum": 0},
          "mime": {"type": "string"},
          "sha256": {"type": "string"},
          "url": {"type": "string", "description": "Absolute, signed download link; show it exactly as given."},
          "expires_at": {"type": "integer", "description": "Unix time after which the link stops working."}
        }
      },
      "Display": {
        "type": "object",
        "required": ["kind", "mime"],
        "properties": {
          "kind": {"type": "string", "enum": ["image", "table", "text"]},
          "mime": {"type": "string", "description": "image/png for an image; text/markdown for a table."},
          "text": {"type": "string", "description": "A table (Markdown) or text."},
          "file": {"$ref": "#/components/schemas/File"}
        }
      },
      "SkippedFile": {
        "type": "object",
        "required": ["path", "reason"],
        "properties": {
          "path": {"type": "string"},
          "reason": {"type": "string", "description": "symlink, not_regular, too_large, too_many, too_deep, too_long, quota, ignored or too_many_figures (more figures shown than the server keeps)."}
        }
      },
      "Snippet": {
        "type": "object",
        "required": ["index", "language", "status", "exit_code", "signal", "stdout", "stderr", "wall_ms"],
        "properties": {
          "index": {"type": "integer", "minimum": 0, "description": "0-based: the snippet's, or with `markdown` the block's, position (texts count blocks from 1)."},
          "language": {"type": "string"},
          "status": {"type": "string"},
          "exit_code": {"type": ["integer", "null"]},
          "signal": {"type": ["integer", "null"]},
          "stdout": {"type": "string"},
          "stderr": {"type": "string"},
          "wall_ms": {"type": "integer"},
          "budget": {"type": "string", "description": "install (an install step: pip installs of index requirements and nothing else, on install_wall_time_s), program (the run's limits) or environment (answered from the prepared environment without running)."}
        }
      },
      "PlanEntry": {
        "type": "object",
        "required": ["index", "language", "run", "reason"],
        "properties": {
          "index": {"type": "integer", "minimum": 0, "description": "0-based position of the block in the message."},
          "language": {"type": "string"},
          "run": {"type": "boolean"},
          "reason": {"type": "string", "description": "Why it runs or not; counts blocks from 1 as a reader does, e.g. 'ran as app.py (by block 2)'."}
        }
      },
      "Error": {
        "type": "object",
        "required": ["error"],
        "properties": {
          "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {
              "code": {"type": "string", "description": "e.g. invalid_json, unknown_field, conflicting_fields, limit_above_ceiling, unauthorized, user_forbidden, origin_forbidden, network_forbidden, invalid_package, session_busy, unsupported_media_type, busy, environment_building."},
              "message": {"type": "string", "description": "What went wrong, in a sentence."},
              "field": {"type": "string", "description": "The request field at fault, when there is one."}
            }
          }
        }
      }
    }
  }
})json";

}  // namespace

std::string OpenApiJson(const config::Config& config) {
  rapidjson::Document doc;
  doc.Parse(kSpec);
  if (doc.HasParseError() || !doc.IsObject()) return "";
  auto& alloc = doc.GetAllocator();

  // `language`: the names this server runs (aliases work too, but one name per language keeps
  // the model's choice simple).
  rapidjson::Value* language =
      rapidjson::Pointer(
          "/paths/~1run/post/requestBody/content/application~1json/schema/properties/language")
          .Get(doc);
  if (language == nullptr || !language->IsObject()) return "";
  rapidjson::Value names(rapidjson::kArrayType);
  for (const auto& l : config.languages) {
    names.PushBack(
        rapidjson::Value(l.name.c_str(), static_cast<rapidjson::SizeType>(l.name.size()), alloc),
        alloc);
  }
  language->AddMember("enum", names, alloc);

  // The response's `limits`: one integer per limit of the table, in its order.
  rapidjson::Value* limits =
      rapidjson::Pointer("/components/schemas/RunResult/properties/limits/properties").Get(doc);
  if (limits == nullptr || !limits->IsObject()) return "";
  for (const auto& key : config::LimitKeys()) {
    rapidjson::Value type(rapidjson::kObjectType);
    type.AddMember("type", "integer", alloc);
    limits->AddMember(rapidjson::StringRef(key.name), type, alloc);
  }

  // The local quick start accepts requests without a token: say so (an empty security
  // requirement means "none needed").
  if (config.allow_anonymous && doc.HasMember("security") && doc["security"].IsArray()) {
    doc["security"].PushBack(rapidjson::Value(rapidjson::kObjectType), alloc);
  }

  rapidjson::StringBuffer buffer;
  rapidjson::PrettyWriter<rapidjson::StringBuffer> writer(buffer);
  writer.SetIndent(' ', 2);
  doc.Accept(writer);
  return std::string(buffer.GetString(), buffer.GetSize()) + "\n";
}

HttpResponse OpenApiResponse(const HttpRequest& request, const config::Config& config) {
  if (request.method != "GET" && request.method != "HEAD") {
    HttpResponse r = ErrorResponse(ApiCode::kMethodNotAllowed, "use GET /openapi.json");
    r.headers["Allow"] = "GET, HEAD";
    return r;
  }
  HttpResponse response;
  response.body = OpenApiJson(config);
  if (response.body.empty()) {
    return ErrorResponse(ApiCode::kInternal, "the built-in OpenAPI document is broken");
  }
  return response;
}

}  // namespace sandrun::api
