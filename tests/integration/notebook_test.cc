// Notebook semantics: figures a Python program shows become PNGs in `files` and
// `displays`, the trailing expression is shown, display() works, and the loader keeps what
// `python3 main.py` gives a program (compared with a bare python3 in the same sandbox).
// The suite's stack has max_figures 3 (CMakeLists.txt).
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "helpers.h"
#include "stack.h"

namespace sandrun::integration {
namespace {

// Matplotlib's first import in a sandbox builds its font cache: generous limits.
const std::map<std::string, int64_t> kPlotLimits = {{"wall_time_s", 60}, {"cpu_time_s", 60}};

rapidjson::Document RunPython(const std::string& code) {
  return PostRun(RunRequest("python", code, kPlotLimits));
}

const rapidjson::Value& Array(const rapidjson::Value& doc, const char* key) {
  BOOST_REQUIRE_MESSAGE(doc.HasMember(key) && doc[key].IsArray(), "answer has no array " << key);
  return doc[key];
}

// The kinds of `displays`, in order, e.g. "image,table".
std::string Kinds(const rapidjson::Value& doc) {
  std::string kinds;
  for (const auto& d : Array(doc, "displays").GetArray()) {
    kinds += (kinds.empty() ? "" : ",") + Str(d, "kind");
  }
  return kinds;
}

// The paths of `files`, in order, comma-separated.
std::string FilePaths(const rapidjson::Value& doc) {
  std::string paths;
  for (const auto& f : Array(doc, "files").GetArray()) {
    paths += (paths.empty() ? "" : ",") + Str(f, "path");
  }
  return paths;
}

// Width of a PNG from its IHDR chunk; 0 if `png` is not a PNG.
uint32_t PngWidth(const std::string& png) {
  if (png.size() < 24 || png.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0) return 0;
  const auto* b = reinterpret_cast<const unsigned char*>(png.data()) + 16;
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
}

// Downloads an image display's file through nginx: a PNG, served inline, as listed.
std::string DownloadImage(const rapidjson::Value& display) {
  BOOST_TEST(Str(display, "kind") == "image");
  BOOST_TEST(Str(display, "mime") == "image/png");
  BOOST_REQUIRE_MESSAGE(display.HasMember("file") && display["file"].IsObject(), "no file");
  const rapidjson::Value& file = display["file"];
  HttpResponse download = GetUrl(Str(file, "url"));
  BOOST_TEST(download.status == 200);
  BOOST_TEST(download.Header("Content-Type") == "image/png");
  BOOST_TEST(download.Header("Content-Disposition").rfind("inline", 0) == 0);
  BOOST_TEST(PngWidth(download.body) > 0u, "not a PNG");
  BOOST_TEST(Sha256Hex(download.body) == Str(file, "sha256"));
  return download.body;
}

std::string Json(const std::function<void(rapidjson::Writer<rapidjson::StringBuffer>&)>& body) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  w.StartObject();
  body(w);
  w.Key("limits");
  w.StartObject();
  for (const auto& [name, value] : kPlotLimits) {
    w.Key(name.c_str());
    w.Int64(value);
  }
  w.EndObject();
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

void Field(rapidjson::Writer<rapidjson::StringBuffer>& w, const char* key, const std::string& v) {
  w.Key(key);
  w.String(v.c_str(), static_cast<rapidjson::SizeType>(v.size()));
}

std::string Escape(const std::string& s) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  w.String(s.c_str(), static_cast<rapidjson::SizeType>(s.size()));
  const std::string quoted(buffer.GetString(), buffer.GetSize());
  return quoted.substr(1, quoted.size() - 2);
}

// A model's answer written for a notebook: imports and data, analysis, plot.
const std::string kThreeCellAnswer =
    "Here is the analysis, step by step.\n\n"
    "**Step 1: imports and data**\n\n"
    "```python\n"
    "import numpy as np\n"
    "import pandas as pd\n"
    "import matplotlib.pyplot as plt\n"
    "\n"
    "df = pd.DataFrame({'region': ['north', 'south', 'east', 'west'],\n"
    "                   'sales': [120, 180, 150, 150]})\n"
    "df.to_csv('sales.csv', index=False)\n"
    "```\n\n"
    "**Step 2: analysis**\n\n"
    "```python\n"
    "print('mean sales:', np.mean(df['sales']))\n"
    "df.sort_values('sales', ascending=False)\n"
    "```\n\n"
    "**Step 3: plot**\n\n"
    "```python\n"
    "df.plot.bar(x='region', y='sales', title='Sales by region')\n"
    "plt.tight_layout()\n"
    "plt.show()\n"
    "```\n\n"
    "The south region sells most.\n";

}  // namespace

BOOST_AUTO_TEST_SUITE(Notebook)

BOOST_AUTO_TEST_CASE(shown_figure_is_a_png_in_files_and_displays) {
  auto doc = RunPython(
      "import matplotlib.pyplot as plt\n"
      "plt.plot([1, 2, 3], [3, 1, 2])\n"
      "plt.title('one')\n"
      "plt.show()\n"
      "print('after')\n");
  BOOST_TEST(Str(doc, "status") == "ok");
  BOOST_TEST(Str(doc, "stdout") == "after\n");
  BOOST_TEST(Str(doc, "stderr").find("non-interactive") == std::string::npos, Str(doc, "stderr"));
  BOOST_REQUIRE(Kinds(doc) == "image");
  const rapidjson::Value& display = doc["displays"][0];
  BOOST_TEST(Str(display["file"], "name") == "figure-1.png");
  BOOST_TEST(FilePaths(doc) == "figure-1.png");
  DownloadImage(display);
}

BOOST_AUTO_TEST_CASE(two_shown_figures_come_in_order) {
  auto doc = RunPython(
      "import matplotlib.pyplot as plt\n"
      "plt.figure(figsize=(2, 2)); plt.plot([1, 2]); plt.show()\n"
      "fig = plt.figure(figsize=(6, 2)); plt.bar(['a', 'b'], [1, 2]); fig.show()\n");
  BOOST_TEST(Str(doc, "status") == "ok");
  BOOST_REQUIRE(Kinds(doc) == "image,image");
  BOOST_TEST(Str(doc["displays"][0]["file"], "name") == "figure-1.png");
  BOOST_TEST(Str(doc["displays"][1]["file"], "name") == "figure-2.png");
  // The narrow figure first: the order is the order shown.
  const uint32_t first = PngWidth(DownloadImage(doc["displays"][0]));
  const uint32_t second = PngWidth(DownloadImage(doc["displays"][1]));
  BOOST_TEST(first < second);
  // fig.show() showed the second; it is not shown again when the program ends.
  BOOST_TEST(Array(doc, "files").Size() == 2u);
}

BOOST_AUTO_TEST_CASE(figure_left_open_is_shown_at_the_end) {
  auto doc = RunPython(
      "import pandas as pd\n"
      "pd.DataFrame({'x': [1, 2, 3]}).plot()\n"
      "print('done')\n");
  BOOST_TEST(Str(doc, "status") == "ok");
  BOOST_TEST(Str(doc, "stdout") == "done\n");
  BOOST_REQUIRE(Kinds(doc) == "image");
  DownloadImage(doc["displays"][0]);
}

BOOST_AUTO_TEST_CASE(saved_and_shown_figure_is_not_duplicated) {
  auto doc = RunPython(
      "import matplotlib.pyplot as plt\n"
      "plt.plot([1, 2])\n"
      "plt.savefig('/mnt/data/chart.png')\n"
      "plt.show()\n");
  BOOST_TEST(Str(doc, "status") == "ok");
  BOOST_TEST(FilePaths(doc) == "chart.png");
  BOOST_REQUIRE(Kinds(doc) == "image");
  BOOST_TEST(Str(doc["displays"][0]["file"], "path") == "chart.png");
  DownloadImage(doc["displays"][0]);
}

BOOST_AUTO_TEST_CASE(figure_named_like_a_workspace_file_does_not_replace_it) {
  auto doc = RunPython(
      "import matplotlib.pyplot as plt\n"
      "open('figure-1.png', 'w').write('mine')\n"
      "plt.plot([1, 2]); plt.show()\n");
  BOOST_TEST(Str(doc, "status") == "ok");
  BOOST_REQUIRE(Kinds(doc) == "image");
  BOOST_TEST(Str(doc["displays"][0]["file"], "path") == "shown/figure-1.png");
  BOOST_TEST(Str(doc["displays"][0]["file"], "name") == "figure-1.png");
  DownloadImage(doc["displays"][0]);
  for (const auto& f : Array(doc, "files").GetArray()) {
    if (Str(f, "path") == "figure-1.png") BOOST_TEST(GetUrl(Str(f, "url")).body == "mine");
  }
}

BOOST_AUTO_TEST_CASE(trailing_path_string_is_shown_as_repr) {
  auto doc = RunPython(
      "file_path = '/mnt/data/report.txt'\n"
      "with open(file_path, 'w') as f:\n"
      "    f.write('hello')\n"
      "print('saved')\n"
      "file_path\n");
  BOOST_TEST(Str(doc, "status") == "ok");
  BOOST_TEST(Str(doc, "stdout") == "saved\n'/mnt/data/report.txt'\n");
  BOOST_TEST(Kinds(doc) == "");
  BOOST_TEST(FilePaths(doc) == "report.txt");
}

BOOST_AUTO_TEST_CASE(trailing_dataframe_is_a_markdown_table_shown_once) {
  auto doc = RunPython(
      "import pandas as pd\n"
      "df = pd.DataFrame({'city': ['Paris', 'Oslo'], 'temp': [12.5, 3.25]})\n"
      "df.head()\n");
  BOOST_TEST(Str(doc, "status") == "ok");
  // A value is shown once: the table, not also its text in stdout.
  BOOST_TEST(Str(doc, "stdout") == "");
  BOOST_REQUIRE(Kinds(doc) == "table");
  BOOST_TEST(Str(doc["displays"][0], "mime") == "text/markdown");
  BOOST_TEST(Str(doc["displays"][0], "text") ==
             "|  | city | temp |\n"
             "|---|---|---|\n"
             "| 0 | Paris | 12.5 |\n"
             "| 1 | Oslo | 3.25 |");
  BOOST_TEST(Array(doc, "files").Size() == 0u);
}

BOOST_AUTO_TEST_CASE(trailing_assignment_or_none_shows_nothing) {
  for (const char* code : {"x = 5\n", "print('a')\nNone\n", "def f():\n    pass\nf()\n",
                           "import matplotlib.pyplot as plt\nplt.close('all')\n"}) {
    auto doc = RunPython(code);
    BOOST_TEST(Str(doc, "status") == "ok");
    BOOST_TEST(Str(doc, "stdout") == (std::string(code).rfind("print", 0) == 0 ? "a\n" : ""), code);
    BOOST_TEST(Kinds(doc) == "", code);
  }
}

BOOST_AUTO_TEST_CASE(trailing_image_and_figure_are_images) {
  auto doc = RunPython(
      "from PIL import Image\n"
      "Image.new('RGB', (40, 30), 'red').show()\n"
      "import matplotlib.pyplot as plt\n"
      "fig, ax = plt.subplots()\n"
      "ax.plot([1, 2])\n"
      "fig\n");
  BOOST_TEST(Str(doc, "status") == "ok");
  BOOST_TEST(Str(doc, "stdout") == "");
  BOOST_REQUIRE(Kinds(doc) == "image,image");
  BOOST_TEST(PngWidth(DownloadImage(doc["displays"][0])) == 40u);
  DownloadImage(doc["displays"][1]);
}

BOOST_AUTO_TEST_CASE(display_shows_each_object_in_order) {
  auto doc = RunPython(
      "import pandas as pd\n"
      "display('hi', pd.Series([1, 2], name='n'))\n"
      "print('between')\n"
      "display({'a': 1})\n");
  BOOST_TEST(Str(doc, "status") == "ok");
  // The Series is shown once, as its table.
  BOOST_TEST(Str(doc, "stdout") ==
             "'hi'\n"
             "between\n"
             "{'a': 1}\n");
  BOOST_REQUIRE(Kinds(doc) == "table");
  BOOST_TEST(Str(doc["displays"][0], "text") == "|  | n |\n|---|---|\n| 0 | 1 |\n| 1 | 2 |");
}

BOOST_AUTO_TEST_CASE(figures_past_the_cap_are_skipped_with_a_reason) {
  const int64_t cap = Stack::Get().ConfigInt("max_figures");
  BOOST_REQUIRE(cap == 3);
  auto doc = RunPython(
      "import matplotlib.pyplot as plt\n"
      "for i in range(5):\n"
      "    plt.plot([i, i + 1]); plt.show()\n");
  BOOST_TEST(Str(doc, "status") == "ok");
  BOOST_TEST(Kinds(doc) == "image,image,image");
  std::vector<std::string> skipped;
  for (const auto& s : Array(doc, "files_skipped").GetArray()) {
    if (Str(s, "reason") == "ignored") continue;  // .cache/ (fontconfig's)
    BOOST_TEST(Str(s, "reason") == "too_many_figures");
    skipped.push_back(Str(s, "path"));
  }
  BOOST_TEST(skipped == (std::vector<std::string>{"figure-4.png", "figure-5.png"}));
}

BOOST_AUTO_TEST_CASE(hostile_manifest_publishes_nothing_outside_the_outputs_area) {
  // The program writes the manifest itself: links out of the outputs area, names with '/',
  // paths out of the workspace, garbage. Nothing of it may be published or crash the daemon.
  auto doc = RunPython(
      "import os\n"
      "out = os.environ['SANDRUN_OUTPUTS']\n"
      "os.symlink('/etc/passwd', out + '/evil.png')\n"
      "os.mkfifo(out + '/fifo.png')\n"
      "lines = [\n"
      "  '{\"kind\": \"image\", \"file\": \"evil.png\"}',\n"
      "  '{\"kind\": \"image\", \"file\": \"fifo.png\"}',\n"
      "  '{\"kind\": \"image\", \"file\": \"../ws/x.png\"}',\n"
      "  '{\"kind\": \"image\", \"workspace_file\": \"../../etc/passwd\"}',\n"
      "  '{\"kind\": \"table\", \"mime\": \"text/html\", \"text\": \"<script>\"}',\n"
      "  'not json', '[1, 2]', '{\"kind\": \"image\"}',\n"
      "]\n"
      "with open(out + '/displays.jsonl', 'a') as f:\n"
      "    f.write('\\n'.join(lines) + '\\n')\n");
  BOOST_TEST(Str(doc, "status") == "ok");
  BOOST_TEST(Kinds(doc) == "");
  BOOST_TEST(Array(doc, "files").Size() == 0u);
  std::string reasons;
  for (const auto& s : Array(doc, "files_skipped").GetArray()) {
    reasons += Str(s, "path") + ":" + Str(s, "reason") + " ";
  }
  BOOST_TEST(reasons == "evil.png:symlink fifo.png:not_regular ");
  BOOST_TEST(Str(doc, "stderr").find("sandrun: 6 displays left out") != std::string::npos,
             Str(doc, "stderr"));
}

// The loader keeps what `python3 main.py` gives a program: the same program run bare by bash
// (without sandrun's PYTHONPATH entry, so without sitecustomize) in the same sandbox prints
// the same, with the same exit code. Step 1 is the program; step 0 runs its file bare.
BOOST_AUTO_TEST_CASE(python_semantics_match_bare_python3) {
  const std::vector<std::pair<std::string, std::string>> programs = {
      {"argv, name, file, path, globals, imports, input, exit code",
       "import sys, helper\n"
       "print(sys.argv, __name__, __file__, __doc__, __package__, __spec__)\n"
       "print(sys.path[:2], sorted(globals()), type(__loader__).__name__)\n"
       "print(helper.VALUE, sys.modules['__main__'] is sys.modules[__name__])\n"
       "name = input('name? ')\n"
       "print('hello', name)\n"
       "sys.exit(3)\n"},
      {"uncaught exception: traceback and exit code 1",
       "def inner():\n"
       "    return {}['missing']\n"
       "def outer():\n"
       "    try:\n"
       "        inner()\n"
       "    except KeyError as e:\n"
       "        raise ValueError('wrapped') from e\n"
       "print('before')\n"
       "outer()\n"},
      {"syntax error", "print('never')\nx = (\n"},
      {"pickle of a class of __main__, __main__ guard, warnings",
       "import pickle, warnings\n"
       "class Point:\n"
       "    def __init__(self, x): self.x = x\n"
       "def main():\n"
       "    p = pickle.loads(pickle.dumps(Point(4)))\n"
       "    warnings.warn('careful')\n"
       "    print(type(p).__module__, p.x)\n"
       "if __name__ == '__main__':\n"
       "    main()\n"},
      {"exit with a message", "import sys\nsys.exit('bad input')\n"},
  };
  for (const auto& [what, code] : programs) {
    BOOST_TEST_CONTEXT(what) {
      const std::string body = Json([&](auto& w) {
        w.Key("snippets");
        w.StartArray();
        w.StartObject();
        Field(w, "language", "bash");
        Field(w, "code",
              "printf 'Ada\\n' | env PYTHONPATH=/home/user SANDRUN_OUTPUTS= "
              "/usr/bin/python3 /home/user/.sandrun/1/main.py\n");
        w.EndObject();
        w.StartObject();
        Field(w, "language", "python");
        Field(w, "code", code);
        w.EndObject();
        w.EndArray();
        Field(w, "stdin", "Ada\n");
        w.Key("continue_on_error");
        w.Bool(true);
        w.Key("files");
        w.StartArray();
        w.StartObject();
        Field(w, "path", "helper.py");
        Field(w, "content_base64", "VkFMVUUgPSA0Mgo=");  // "VALUE = 42\n"
        w.EndObject();
        w.EndArray();
      });
      auto doc = PostRun(body);
      const rapidjson::Value& steps = Array(doc, "snippets");
      BOOST_REQUIRE(steps.Size() == 2u);
      const rapidjson::Value& bare = steps[0];
      const rapidjson::Value& loaded = steps[1];
      BOOST_TEST(Str(loaded, "stdout") == Str(bare, "stdout"));
      BOOST_TEST(Str(loaded, "stderr") == Str(bare, "stderr"));
      BOOST_TEST(Int(loaded, "exit_code") == Int(bare, "exit_code"));
      BOOST_TEST(Str(loaded, "stderr").find("sandrun_main") == std::string::npos);
      BOOST_TEST(Str(loaded, "stderr").find("sandrun_loader") == std::string::npos);
    }
  }
}

// Every Python start of a run imports sitecustomize and the loader: they come with the
// bytecode the daemon built at start-up, unchecked-hash .pyc files (PEP 552) of
// this Python's magic number, so no run compiles them.
BOOST_AUTO_TEST_CASE(support_files_come_with_their_bytecode) {
  auto doc = RunPython(R"py(import importlib.util, sys
for name in ("sitecustomize", "sandrun_loader"):
    cached = importlib.util.cache_from_source(sys.modules[name].__file__)
    with open(cached, "rb") as f:
        head = f.read(8)
    ok = head[:4] == importlib.util.MAGIC_NUMBER and int.from_bytes(head[4:8], "little") == 1
    print(name, "unchecked-hash pyc" if ok else head)
)py");
  BOOST_TEST(Str(doc, "status") == "ok");
  BOOST_TEST(Str(doc, "stdout") ==
             "sitecustomize unchecked-hash pyc\nsandrun_loader unchecked-hash pyc\n");
  BOOST_TEST(Str(doc, "stderr") == "");
}

BOOST_AUTO_TEST_CASE(markdown_plot_answer_shows_its_chart) {
  const std::string markdown =
      "Here is how to plot the stock price of Apple, Tesla, Nvidia and Microsoft YTD. "
      "Since I cannot download prices here, this uses sample data:\n\n"
      "```python\n"
      "import numpy as np\n"
      "import pandas as pd\n"
      "import matplotlib.pyplot as plt\n"
      "\n"
      "days = pd.date_range('2026-01-01', periods=60, freq='B')\n"
      "rng = np.random.default_rng(0)\n"
      "prices = pd.DataFrame({t: 100 * np.exp(np.cumsum(rng.normal(0, 0.02, len(days))))\n"
      "                       for t in ['AAPL', 'TSLA', 'NVDA', 'MSFT']}, index=days)\n"
      "prices.plot(figsize=(10, 5), title='Stock prices YTD')\n"
      "plt.ylabel('Price (USD)')\n"
      "plt.grid(True)\n"
      "plt.show()\n"
      "prices.tail(3).round(2)\n"
      "```\n\n"
      "The chart shows each stock's price since January.\n";
  auto doc = PostRun(Json([&](auto& w) { Field(w, "markdown", markdown); }));
  BOOST_TEST(Str(doc, "status") == "ok");
  BOOST_REQUIRE(Kinds(doc) == "image,table");
  DownloadImage(doc["displays"][0]);
  BOOST_TEST(Str(doc["displays"][1], "text").find("| AAPL | TSLA | NVDA | MSFT |") !=
             std::string::npos);
  BOOST_TEST(Str(doc, "stdout").find("AAPL") == std::string::npos);  // shown once: the table
}

// ---- An answer is a notebook: a markdown answer's Python blocks share one interpreter ----

BOOST_AUTO_TEST_CASE(three_cell_answer_runs_as_one_notebook_with_its_chart) {
  // As the Run button sends an answer (openwebui/sandrun_action.py): markdown, user, session.
  auto doc = PostRun(Json([&](auto& w) {
    Field(w, "markdown", kThreeCellAnswer);
    Field(w, "user", "notebook-user");
    Field(w, "session", "chat-three-cells");
  }));
  BOOST_TEST(Str(doc, "status") == "ok", Str(doc, "stderr"));
  const auto& steps = Array(doc, "snippets");
  BOOST_REQUIRE(steps.Size() == 3u);
  for (const auto& step : steps.GetArray()) {
    BOOST_TEST(Str(step, "status") == "ok", Str(step, "stderr"));
    BOOST_TEST(Str(step, "stderr") == "");
  }
  BOOST_TEST(Str(steps[1], "stdout").find("mean sales: 150.0") != std::string::npos);
  // Block 2's trailing expression is shown as a notebook shows it: a table, once.
  BOOST_TEST(Kinds(doc) == "table,image");
  BOOST_TEST(Str(doc["displays"][0], "text").find("| north |") != std::string::npos);
  BOOST_TEST(Str(doc, "stdout").find("north") == std::string::npos);
  const std::string png = DownloadImage(doc["displays"][1]);
  // The chart is a file of the run too.
  bool listed = false;
  for (const auto& f : Array(doc, "files").GetArray()) {
    listed = listed || Str(f, "sha256") == Sha256Hex(png);
  }
  BOOST_TEST(listed, "the chart is not in files");
  BOOST_TEST(FilePaths(doc).find("sales.csv") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(failing_middle_cell_stops_the_rest_and_names_its_block) {
  const std::string markdown =
      "First the data:\n\n```python\nvalues = [3, 1, 2]\nprint('loaded', len(values))\n```\n\n"
      "Then the analysis:\n\n```python\ntotal = sum(values)\nprint('total', total)\n"
      "average = total / count_of_values\n```\n\n"
      "And the report:\n\n```python\nprint('never printed')\n```\n";
  auto doc = PostRun(Json([&](auto& w) { Field(w, "markdown", markdown); }));
  BOOST_TEST(Str(doc, "status") == "error");
  const auto& steps = Array(doc, "snippets");
  BOOST_REQUIRE(steps.Size() == 2u);
  BOOST_TEST(Str(steps[0], "status") == "ok");
  BOOST_TEST(Str(steps[1], "status") == "error");
  BOOST_TEST(Str(steps[1], "stdout") == "total 6\n");  // block 1's variables were there
  const std::string err = Str(steps[1], "stderr");
  BOOST_TEST(err.find("block 2, line 3") != std::string::npos, err);
  BOOST_TEST(err.find("NameError: name 'count_of_values' is not defined") != std::string::npos,
             err);
  BOOST_TEST(err.find("Cell In") == std::string::npos, err);
  BOOST_TEST(Str(doc, "stdout").find("never printed") == std::string::npos);
  // The plan says the third block did not run.
  bool third_not_run = false;
  for (const auto& entry : Array(doc, "plan").GetArray()) {
    if (Int(entry, "index") == 2) {
      third_not_run = entry["run"].IsFalse() && Str(entry, "reason").rfind("not run", 0) == 0;
    }
  }
  BOOST_TEST(third_not_run);
}

BOOST_AUTO_TEST_CASE(bash_block_between_python_blocks_shares_workspace_and_state) {
  const std::string markdown =
      "```python\nnumbers = [1, 2, 3]\n"
      "open('numbers.txt', 'w').write('\\n'.join(map(str, numbers)) + '\\n')\n```\n\n"
      "```bash\nwc -l < numbers.txt\necho 4 >> numbers.txt\necho from-bash > note.txt\n```\n\n"
      "```python\nprint(sum(numbers), open('numbers.txt').read().split(), "
      "open('note.txt').read().strip())\n```\n";
  auto doc = PostRun(Json([&](auto& w) { Field(w, "markdown", markdown); }));
  BOOST_TEST(Str(doc, "status") == "ok", Str(doc, "stderr"));
  const auto& steps = Array(doc, "snippets");
  BOOST_REQUIRE(steps.Size() == 3u);
  BOOST_TEST(Str(steps[1], "language") == "bash");
  BOOST_TEST(Str(steps[1], "stdout") == "3\n");
  BOOST_TEST(Str(steps[2], "stdout") == "6 ['1', '2', '3', '4'] from-bash\n");
  BOOST_TEST(FilePaths(doc) == "note.txt,numbers.txt");
}

BOOST_AUTO_TEST_CASE(one_python_block_snippets_and_notebook_false_run_as_programs) {
  // The interpreter's stdout tells a program run (TextIOWrapper) from a kernel's cell.
  const std::string probe = "import sys\nprint(type(sys.stdout).__name__)\n";
  const std::string one = "```python\n" + probe + "```\n\n```bash\necho done\n```\n";
  auto single = PostRun(Json([&](auto& w) { Field(w, "markdown", one); }));
  BOOST_TEST(Str(single, "status") == "ok", Str(single, "stderr"));
  BOOST_TEST(Str(single["snippets"][0], "stdout") == "TextIOWrapper\n");
  const std::string two = "```python\nx = 1\n```\n\n```python\n" + probe + "```\n";
  auto notebook = PostRun(Json([&](auto& w) { Field(w, "markdown", two); }));
  BOOST_TEST(Str(notebook["snippets"][1], "stdout") == "OutStream\n");
  auto opted_out = PostRun(Json([&](auto& w) {
    Field(w, "markdown", two);
    w.Key("notebook");
    w.Bool(false);
  }));
  BOOST_TEST(Str(opted_out["snippets"][1], "stdout") == "TextIOWrapper\n");
  auto snippets = PostRun(Json([&](auto& w) {
    w.Key("snippets");
    w.StartArray();
    for (const std::string& code : {std::string("x = 1\n"), probe}) {
      w.StartObject();
      Field(w, "language", "python");
      Field(w, "code", code);
      w.EndObject();
    }
    w.EndArray();
  }));
  BOOST_TEST(Str(snippets["snippets"][1], "stdout") == "TextIOWrapper\n");
  auto snippets_notebook = PostRun(Json([&](auto& w) {
    w.Key("snippets");
    w.StartArray();
    for (const std::string& code : {std::string("x = 41\n"), std::string("print(x + 1)\n")}) {
      w.StartObject();
      Field(w, "language", "python");
      Field(w, "code", code);
      w.EndObject();
    }
    w.EndArray();
    w.Key("notebook");
    w.Bool(true);
  }));
  BOOST_TEST(Str(snippets_notebook, "status") == "ok", Str(snippets_notebook, "stderr"));
  BOOST_TEST(Str(snippets_notebook["snippets"][1], "stdout") == "42\n");
}

BOOST_AUTO_TEST_CASE(input_in_a_notebook_run_reads_stdin_then_ends_in_eoferror) {
  const std::string markdown =
      "```python\ngreeting = 'hello'\n```\n\n"
      "```python\nname = input('Name? ')\nprint(greeting, name)\ninput()\n```\n";
  auto doc = PostRun(Json([&](auto& w) {
    Field(w, "markdown", markdown);
    Field(w, "stdin", "Ada\n");
  }));
  BOOST_TEST(Str(doc, "status") == "error");
  const auto& steps = Array(doc, "snippets");
  BOOST_REQUIRE(steps.Size() == 2u);
  BOOST_TEST(Str(steps[1], "stdout") == "Name? hello Ada\n");
  const std::string err = Str(steps[1], "stderr");
  BOOST_TEST(err.find("EOFError") != std::string::npos, err);
  BOOST_TEST(err.find("block 2, line 3") != std::string::npos, err);
}

BOOST_AUTO_TEST_CASE(input_without_stdin_in_a_notebook_run_is_said_in_one_line) {
  const std::string markdown =
      "```python\ngreeting = 'hello'\n```\n\n```python\nname = input('Name? ')\n```\n";
  auto doc = PostRun(Json([&](auto& w) { Field(w, "markdown", markdown); }));
  BOOST_TEST(Str(doc, "status") == "error");
  const std::string err = Str(doc, "stderr");
  BOOST_TEST(err.find("sandrun: the program asked for input (input() on line 1 of block 2) and "
                      "got none") != std::string::npos,
             err);
}

// plt.savefig('chart.png') in a cell: the chart is the workspace file, not also a drawn
// figure-N.png, with or without plt.show(); a figure shown and not saved is one figure-N.png.
BOOST_AUTO_TEST_CASE(a_figure_saved_in_a_notebook_run_is_shown_once) {
  for (const std::string show : {"plt.show()\n", ""}) {
    const std::string markdown =
        "```python\nimport matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\n"
        "plt.savefig('chart.png')\n" +
        show + "```\n\n```python\nprint('next')\n```\n";
    auto doc = PostRun(Json([&](auto& w) { Field(w, "markdown", markdown); }));
    BOOST_TEST(Str(doc, "status") == "ok", Str(doc, "stderr"));
    const auto& files = Array(doc, "files");
    BOOST_TEST_REQUIRE(files.Size() == 1u, show);
    BOOST_TEST(Str(files[0], "path") == "chart.png");
    BOOST_TEST(Array(doc, "displays").Size() == 0u, show);
  }
  const std::string shown =
      "```python\nimport matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()\n```\n\n"
      "```python\nprint('next')\n```\n";
  auto doc = PostRun(Json([&](auto& w) { Field(w, "markdown", shown); }));
  BOOST_TEST_REQUIRE(Array(doc, "files").Size() == 1u);
  BOOST_TEST(Str(Array(doc, "files")[0], "path") == "figure-1.png");
  BOOST_TEST(Array(doc, "displays").Size() == 1u);
}

// One Python block after a bash block runs as a program (no kernel): its traceback names the
// block the same way, not the program file's path.
BOOST_AUTO_TEST_CASE(a_programs_traceback_names_its_block) {
  const std::string markdown =
      "```bash\necho setup\n```\n\n```python\nx = 1\nprint(x)\nprint(y)\n```\n";
  auto doc = PostRun(Json([&](auto& w) { Field(w, "markdown", markdown); }));
  BOOST_TEST(Str(doc, "status") == "error");
  const std::string err = Str(doc, "stderr");
  BOOST_TEST(err.find("block 2, line 3, in <module>") != std::string::npos, err);
  BOOST_TEST(err.find(".sandrun/1/main.py") == std::string::npos, err);
  BOOST_TEST(err.find("NameError: name 'y' is not defined") != std::string::npos, err);
}

BOOST_AUTO_TEST_CASE(script_habits_work_in_a_notebook_run) {
  // argparse, __file__, and sys.exit(main()) of an answer written as a script.
  const std::string markdown =
      "```python\nimport argparse, os, sys\nparser = argparse.ArgumentParser()\n"
      "parser.add_argument('--n', type=int, default=3)\nargs = parser.parse_args()\n"
      "print(args.n, os.path.basename(__file__))\n```\n\n"
      "```python\ndef main():\n    print('main ran')\n    return 0\n\n"
      "if __name__ == '__main__':\n    sys.exit(main())\n```\n\n"
      "```python\nprint('after exit 0')\nsys.exit(2)\n```\n";
  auto doc = PostRun(Json([&](auto& w) { Field(w, "markdown", markdown); }));
  BOOST_TEST(Str(doc, "status") == "error");
  BOOST_TEST(Int(doc, "exit_code") == 2);
  const auto& steps = Array(doc, "snippets");
  BOOST_REQUIRE(steps.Size() == 3u);
  BOOST_TEST(Str(steps[0], "stdout") == "3 main.py\n", Str(steps[0], "stderr"));
  BOOST_TEST(Str(steps[1], "status") == "ok");
  BOOST_TEST(Str(steps[1], "stdout") == "main ran\n");
  BOOST_TEST(Str(steps[1], "stderr") == "");
  BOOST_TEST(Str(steps[2], "stdout") == "after exit 0\n");
  BOOST_TEST(Int(steps[2], "exit_code") == 2);
  BOOST_TEST(Str(steps[2], "stderr") == "");
}

BOOST_AUTO_TEST_CASE(notebook_run_keeps_the_run_limits) {
  const std::string markdown =
      "```python\nimport time\nstart = time.time()\n```\n\n"
      "```python\nwhile True:\n    pass\n```\n\n```python\nprint('after')\n```\n";
  auto doc = PostRun(R"({"markdown": ")" + Escape(markdown) +
                     R"(", "limits": {"wall_time_s": 3, "cpu_time_s": 2}})");
  BOOST_TEST(Str(doc, "status") == "timeout");
  const auto& steps = Array(doc, "snippets");
  BOOST_REQUIRE(steps.Size() == 2u);
  // The CPU limit, or the wall-clock one on a busy host: either stops the cell and the run.
  const std::string err = Str(steps[1], "stderr");
  BOOST_TEST(
      (err.find("sandrun: stopped: CPU time limit of 2 s reached") != std::string::npos ||
       err.find("sandrun: stopped: wall-clock time limit of 3 s reached") != std::string::npos),
      err);
  BOOST_TEST(err.find("block 2, line") != std::string::npos, err);
  BOOST_TEST(Str(doc, "stdout").find("after") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(cost_of_a_three_block_answer_as_programs_and_as_a_notebook) {
  // Timed at the client through nginx, the median of 3, reported and bounded far from the
  // measured value: three independent blocks (each runs either way), and the three-cell
  // answer (as programs it stops at block 2's NameError: that is the "before").
  const std::string prints =
      "```python\nprint(1)\n```\n\n```python\nprint(2)\n```\n\n```python\nprint(3)\n```\n";
  auto median_ms = [&](const std::string& markdown, bool notebook, const char* status) {
    std::vector<double> ms;
    for (int i = 0; i < 3; ++i) {
      const auto start = std::chrono::steady_clock::now();
      auto doc = PostRun(Json([&](auto& w) {
        Field(w, "markdown", markdown);
        w.Key("notebook");
        w.Bool(notebook);
      }));
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count());
      BOOST_TEST(Str(doc, "status") == status, Str(doc, "stderr"));
    }
    std::sort(ms.begin(), ms.end());
    return ms[1];
  };
  const double programs = median_ms(prints, false, "ok");
  const double notebook = median_ms(prints, true, "ok");
  BOOST_TEST_MESSAGE("three print blocks: " << programs << " ms as programs, " << notebook
                                            << " ms as a notebook (median of 3)");
  const double answer_programs = median_ms(kThreeCellAnswer, false, "error");
  const double answer_notebook = median_ms(kThreeCellAnswer, true, "ok");
  BOOST_TEST_MESSAGE("three-cell answer: " << answer_programs
                                           << " ms as programs (fails at block 2), "
                                           << answer_notebook << " ms as a notebook (median of 3)");
  BOOST_TEST(notebook < 20000.0);
  BOOST_TEST(answer_notebook < 40000.0);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::integration
