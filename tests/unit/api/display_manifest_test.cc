#define BOOST_TEST_MODULE display_manifest
#include "run/display_manifest.h"

#include <boost/test/unit_test.hpp>

#include "api/run_codec.h"

using namespace sandrun;
using run::DecodeDisplayManifest;
using run::ManifestBounds;

namespace {

storage::ArtifactFile Published(const std::string& path, const std::string& mime) {
  storage::ArtifactFile f;
  f.name = path.substr(path.rfind('/') + 1);
  f.path = path;
  f.mime = mime;
  f.url = "http://h/files/u/r/" + path;
  return f;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(DisplayManifest)

BOOST_AUTO_TEST_CASE(decodes_the_loaders_lines_in_order) {
  auto m = DecodeDisplayManifest(
      "{\"kind\": \"image\", \"mime\": \"image/png\", \"file\": \"figure-1.png\"}\n"
      "{\"kind\": \"table\", \"mime\": \"text/markdown\", \"text\": \"| a |\"}\n"
      "{\"kind\": \"image\", \"workspace_file\": \"plots/chart.png\"}\n"
      "{\"kind\": \"text\", \"mime\": \"text/plain\", \"text\": \"x\"}\n"
      "{\"skipped\": \"figure-2.png\", \"reason\": \"too_many_figures\"}\n",
      ManifestBounds{});
  BOOST_TEST(m.dropped == 0u);
  BOOST_REQUIRE(m.entries.size() == 4u);
  BOOST_TEST(m.entries[0].output_file == "figure-1.png");
  BOOST_TEST(m.entries[1].text == "| a |");
  BOOST_TEST(m.entries[2].workspace_file == "plots/chart.png");
  BOOST_TEST(m.entries[3].mime == "text/plain");
  BOOST_REQUIRE(m.skipped.size() == 1u);
  BOOST_TEST(m.skipped[0].path == "figure-2.png");
  BOOST_TEST(run::OutputFileNames(m) == std::vector<std::string>{"figure-1.png"});
  BOOST_TEST(run::WorkspaceFileNames(m) == std::vector<std::string>{"plots/chart.png"});
}

BOOST_AUTO_TEST_CASE(drops_hostile_or_malformed_lines) {
  const char* lines[] = {
      "not json",
      "[1]",
      "{\"kind\": \"image\"}",
      "{\"kind\": \"image\", \"file\": \"../x.png\"}",
      "{\"kind\": \"image\", \"file\": \"a/b.png\"}",
      "{\"kind\": \"image\", \"file\": \".hidden.png\"}",
      "{\"kind\": \"image\", \"file\": \"page.html\"}",
      "{\"kind\": \"image\", \"file\": \"a.png\", \"workspace_file\": \"b.png\"}",
      "{\"kind\": \"image\", \"workspace_file\": \"../../etc/passwd\"}",
      "{\"kind\": \"image\", \"workspace_file\": \"/etc/passwd\"}",
      "{\"kind\": \"image\", \"workspace_file\": \".sandrun/main.py\"}",
      "{\"kind\": \"table\", \"mime\": \"text/html\", \"text\": \"<b>\"}",
      "{\"kind\": \"table\", \"mime\": \"text/markdown\", \"text\": \"\"}",
      "{\"kind\": \"table\", \"mime\": \"text/markdown\", \"text\": 5}",
      "{\"kind\": \"script\", \"mime\": \"text/markdown\", \"text\": \"x\"}",
      "{\"skipped\": \"x.png\", \"reason\": \"whatever\"}",
      "{\"kind\": \"text\", \"mime\": \"text/plain\", \"text\": \"x\"} trailing",
  };
  std::string text;
  for (const char* line : lines) text += std::string(line) + "\n";
  auto m = DecodeDisplayManifest(text, ManifestBounds{});
  BOOST_TEST(m.entries.empty());
  BOOST_TEST(m.skipped.empty());
  BOOST_TEST(m.dropped == std::size(lines));
}

BOOST_AUTO_TEST_CASE(caps_figures_entries_and_text) {
  ManifestBounds bounds;
  bounds.max_figures = 2;
  bounds.max_entries = 6;
  bounds.max_text_bytes = 10;
  std::string text;
  for (int i = 1; i <= 3; ++i) {
    text += "{\"kind\": \"image\", \"file\": \"figure-" + std::to_string(i) + ".png\"}\n";
  }
  // The same figure again counts once; text past the budget and lines past the entries go.
  text += "{\"kind\": \"image\", \"file\": \"figure-1.png\"}\n";
  text += "{\"kind\": \"table\", \"mime\": \"text/markdown\", \"text\": \"123456\"}\n";
  text += "{\"kind\": \"table\", \"mime\": \"text/markdown\", \"text\": \"123456\"}\n";
  text += "{\"kind\": \"text\", \"mime\": \"text/plain\", \"text\": \"last\"}\n";
  text += "{\"kind\": \"text\", \"mime\": \"text/plain\", \"text\": \"z\"}\n";
  auto m = DecodeDisplayManifest(text, bounds);
  BOOST_TEST(run::OutputFileNames(m) == (std::vector<std::string>{"figure-1.png", "figure-2.png"}));
  BOOST_REQUIRE(m.skipped.size() == 1u);
  BOOST_TEST(m.skipped[0].path == "figure-3.png");
  BOOST_TEST(m.skipped[0].reason == run::kTooManyFigures);
  // figure-1, figure-2, figure-1 again, a table and "last" (exactly the text left): 5 entries
  // + 1 skipped; the second table is over the text budget; "z" is past max_entries.
  BOOST_TEST(m.entries.size() == 5u);
  BOOST_TEST(m.dropped == 2u);
}

BOOST_AUTO_TEST_CASE(output_path_avoids_workspace_paths) {
  using run::OutputArtifactPath;
  BOOST_TEST(OutputArtifactPath("figure-1.png", {}) == "figure-1.png");
  BOOST_TEST(OutputArtifactPath("figure-1.png", {"a.csv", "figure-10.png"}) == "figure-1.png");
  BOOST_TEST(OutputArtifactPath("figure-1.png", {"figure-1.png"}) == "shown/figure-1.png");
  // A workspace file "shown" (a file where the directory would go), or one under shown/.
  BOOST_TEST(OutputArtifactPath("figure-1.png", {"figure-1.png", "shown"}) ==
             "shown-2/figure-1.png");
  BOOST_TEST(OutputArtifactPath("figure-1.png", {"figure-1.png", "shown/figure-1.png"}) ==
             "shown-2/figure-1.png");
  // A workspace directory named like the figure.
  BOOST_TEST(OutputArtifactPath("figure-1.png", {"figure-1.png/x"}) == "shown/figure-1.png");
}

BOOST_AUTO_TEST_CASE(assembles_displays_from_published_files_only) {
  auto m = DecodeDisplayManifest(
      "{\"kind\": \"image\", \"file\": \"figure-1.png\"}\n"
      "{\"kind\": \"image\", \"file\": \"figure-2.png\"}\n"
      "{\"kind\": \"image\", \"workspace_file\": \"chart.png\"}\n"
      "{\"kind\": \"image\", \"workspace_file\": \"notes.png\"}\n"
      "{\"kind\": \"table\", \"mime\": \"text/markdown\", \"text\": \"| a |\"}\n",
      ManifestBounds{});
  // figure-2.png was not published (skipped); notes.png is not an image by its content.
  std::map<std::string, std::string> paths = {{"figure-1.png", "shown/figure-1.png"}};
  std::vector<storage::ArtifactFile> published = {Published("chart.png", "image/png"),
                                                  Published("notes.png", "text/plain"),
                                                  Published("shown/figure-1.png", "image/png")};
  auto displays = run::AssembleDisplays(m, paths, published);
  BOOST_REQUIRE(displays.size() == 3u);
  BOOST_TEST(displays[0].kind == run::kDisplayImage);
  BOOST_TEST(displays[0].file->path == "shown/figure-1.png");
  BOOST_TEST(displays[0].mime == "image/png");
  BOOST_TEST(!displays[0].text.has_value());
  BOOST_TEST(displays[1].file->path == "chart.png");
  BOOST_TEST(displays[2].kind == run::kDisplayTable);
  BOOST_TEST(*displays[2].text == "| a |");
  BOOST_TEST(!displays[2].file.has_value());
}

BOOST_AUTO_TEST_CASE(displays_are_encoded_with_text_or_file) {
  run::RunResponse r;
  r.id = "x";
  r.status = run::RunStatus::kOk;
  r.displays.push_back({run::kDisplayTable, "text/markdown", "| a |", std::nullopt});
  r.displays.push_back(
      {run::kDisplayImage, "image/png", std::nullopt, Published("figure-1.png", "image/png")});
  const std::string json = api::EncodeRunResponse(r);
  BOOST_TEST(json.find("\"displays\":[{\"kind\":\"table\",\"mime\":\"text/markdown\",\"text\":"
                       "\"| a |\"},{\"kind\":\"image\",\"mime\":\"image/png\",\"file\":{\"name\":"
                       "\"figure-1.png\",\"path\":\"figure-1.png\"") != std::string::npos,
             json);
}

BOOST_AUTO_TEST_SUITE_END()
