// A real browser against the real stack (DESIGN.md §2): headless Chromium from Debian, driven
// by tests/browser/check_artifacts.mjs (playwright-core, installed by scripts/test with npm),
// opens a page served by the same nginx and checks that a generated PNG renders, that a
// generated CSV and XLSX download with the right bytes and names, that generated HTML and SVG
// never run their script, and that an expired link shows 410.
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <sys/stat.h>

#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "artifact_helpers.h"
#include "helpers.h"
#include "stack.h"

namespace sandrun::integration {
namespace {

constexpr int kBrowserTimeoutS = 110;  // the script bounds itself at 100 s
constexpr char kMarker[] = "/_test/script-ran";

// Writes every kind of file the browser checks; the HTML and SVG carry script that would
// report to kMarker (and to the page) if it ever ran.
const char* kGenerateFiles = R"py(import csv
import matplotlib.pyplot as plt
from openpyxl import Workbook

fig, ax = plt.subplots(figsize=(3, 2), dpi=50)
ax.plot([1, 2, 3], [1, 4, 9])
fig.savefig('plot.png')

with open('résumé 2024.csv', 'w', newline='', encoding='utf-8') as f:
    csv.writer(f).writerows([['name', 'value'], ['π', 3.14159]])

book = Workbook()
book.active.append(['a', 'b'])
book.active.append([1, 2])
book.save('book.xlsx')

script = ("fetch('/_test/script-ran?KIND');"
          "parent.postMessage('ran-KIND', '*');"
          "document.title = 'ran';")
with open('page.html', 'w') as f:
    f.write('<!doctype html><title>generated</title><script>' + script.replace('KIND', 'html') +
            '</script><img src="x" onerror="fetch(\'/_test/script-ran?html-onerror\')">')
with open('pic.svg', 'w') as f:
    f.write('<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><script>' +
            script.replace('KIND', 'svg') + '</script><rect width="10" height="10"/></svg>')
)py";

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  BOOST_REQUIRE_MESSAGE(out, "cannot write " << path);
  chmod(path.c_str(), 0644);
}

class JsonOut {
 public:
  JsonOut() : writer_(buffer_) {}
  rapidjson::Writer<rapidjson::StringBuffer>& w() { return writer_; }
  void Field(const char* key, const std::string& value) {
    writer_.Key(key);
    writer_.String(value.c_str(), static_cast<rapidjson::SizeType>(value.size()));
  }
  std::string str() const { return std::string(buffer_.GetString(), buffer_.GetSize()); }

 private:
  rapidjson::StringBuffer buffer_;
  rapidjson::Writer<rapidjson::StringBuffer> writer_;
};

// A link of the stack with its expiry moved to the past and signed like the daemon signs:
// what a link looks like once its time is up.
std::string ExpiredLink(const std::string& url) {
  Link link = ParseLink(url);
  link.expires = NowEpochS() - 60;
  link.md5 = SecureLinkMd5(PercentDecode(link.path), link.expires, Stack::Get().LinkSecret());
  return Stack::Get().base_url() + LinkPathAndQuery(link);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(Browser)

BOOST_AUTO_TEST_CASE(generated_files_behave_safely_in_chromium) {
  const std::string browser_dir = std::string(SANDRUN_SOURCE_DIR) + "/tests/browser";
  BOOST_REQUIRE_MESSAGE(
      std::filesystem::exists(browser_dir + "/node_modules/playwright-core/package.json"),
      "playwright-core is not installed: run `npm ci --prefix tests/browser` (scripts/test "
      "does it)");
  BOOST_REQUIRE_MESSAGE(std::filesystem::exists("/usr/bin/chromium"),
                        "Debian's chromium is not installed (scripts/packages/test.txt)");

  auto doc = PostRun(RunRequest("python", kGenerateFiles, {{"wall_time_s", 60}}));
  BOOST_REQUIRE_MESSAGE(Str(doc, "status") == "ok",
                        "the generating run failed: " << Str(doc, "stderr"));
  const rapidjson::Value* png = FindEntry(doc, "files", "path", "plot.png");
  const rapidjson::Value* csv = FindEntry(doc, "files", "path", "résumé 2024.csv");
  const rapidjson::Value* xlsx = FindEntry(doc, "files", "path", "book.xlsx");
  const rapidjson::Value* html = FindEntry(doc, "files", "path", "page.html");
  const rapidjson::Value* svg = FindEntry(doc, "files", "path", "pic.svg");
  BOOST_REQUIRE(png && csv && xlsx && html && svg);
  BOOST_TEST(Str(*png, "mime") == "image/png");
  BOOST_TEST(Str(*csv, "mime") == "text/csv");
  BOOST_TEST(Str(*xlsx, "mime") ==
             "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet");
  BOOST_TEST(Str(*html, "mime") == "text/html");
  BOOST_TEST(Str(*svg, "mime") == "image/svg+xml");

  Stack& stack = Stack::Get();
  const std::string pages = stack.test_pages_dir();
  std::filesystem::copy_file(browser_dir + "/index.html", pages + "/index.html",
                             std::filesystem::copy_options::overwrite_existing);
  chmod((pages + "/index.html").c_str(), 0644);
  WriteText(pages + "/control.html", "<!doctype html><title>control</title><script>fetch('" +
                                         std::string(kMarker) + "?control')</script>");

  JsonOut cases;
  auto& w = cases.w();
  w.StartObject();
  cases.Field("page", stack.base_url() + "/_test/index.html");
  cases.Field("control", stack.base_url() + "/_test/control.html");
  cases.Field("marker", kMarker);
  w.Key("image");
  w.StartObject();
  cases.Field("kind", "png");
  cases.Field("url", Str(*png, "url"));
  cases.Field("name", Str(*png, "name"));
  w.EndObject();
  w.Key("downloads");
  w.StartArray();
  for (const auto& [kind, file] : {std::pair{"csv", csv}, std::pair{"xlsx", xlsx}}) {
    w.StartObject();
    cases.Field("kind", kind);
    cases.Field("url", Str(*file, "url"));
    cases.Field("name", Str(*file, "name"));
    cases.Field("sha256", Str(*file, "sha256"));
    w.EndObject();
  }
  w.EndArray();
  w.Key("scripted");
  w.StartArray();
  for (const auto& [kind, file] : {std::pair{"html", html}, std::pair{"svg", svg}}) {
    w.StartObject();
    cases.Field("kind", kind);
    cases.Field("url", Str(*file, "url"));
    w.EndObject();
  }
  w.EndArray();
  w.Key("expired");
  w.StartObject();
  cases.Field("url", ExpiredLink(Str(*png, "url")));
  w.EndObject();
  w.Key("tampered");
  w.StartObject();
  Link tampered = ParseLink(Str(*csv, "url"));
  tampered.md5[0] = tampered.md5[0] == 'A' ? 'B' : 'A';
  cases.Field("url", stack.base_url() + LinkPathAndQuery(tampered));
  w.EndObject();
  w.EndObject();
  const std::string cases_path = stack.state_dir() + "/browser-cases.json";
  WriteText(cases_path, cases.str());

  const std::string log = stack.state_dir() + "/browser.log";
  const int status = RunWithTimeout({"node", browser_dir + "/check_artifacts.mjs", cases_path}, {},
                                    log, kBrowserTimeoutS);
  const std::string output = ReadFile(log);
  BOOST_TEST_MESSAGE("tests/browser/check_artifacts.mjs:\n" << output);
  std::istringstream lines(output);
  std::string line;
  int passed = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("FAIL ", 0) == 0) BOOST_ERROR("browser: " << line.substr(5));
    if (line.rfind("PASS ", 0) == 0) ++passed;
  }
  BOOST_TEST(status == 0, "check_artifacts.mjs exited with " << status << " (-1: killed after "
                                                             << kBrowserTimeoutS << " s)");
  // control, image, 3 per download, 3 per scripted file, expired, tampered.
  BOOST_TEST(passed == 16, passed << " checks passed");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::integration
