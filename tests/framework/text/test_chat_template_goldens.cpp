#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "test_skip.hpp"
#include "zoo/chat_template.hpp"
#include "zoo/error.hpp"
#include "zoo/input_file.hpp"

using namespace zoo;
namespace fs = std::filesystem;

namespace {

struct Tally {
  int cases = 0, failed = 0;
};

std::int64_t epoch_of(const std::string& date) {
  std::tm tm{};
  REQUIRE(std::sscanf(date.c_str(), "%d-%d-%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday) == 3);
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<std::int64_t>(timegm(&tm));
}

const jinja::Value& field(const jinja::Value& obj, const char* key) {
  const jinja::Value* v = obj.dict->find(key);
  REQUIRE(v);
  return *v;
}

// Renders every case of `goldens` (made by tools/golden/make_chat_template_goldens.py from
// transformers' renderer) with the templates in `dir`, byte for byte; where transformers raised,
// Zoo must raise too: the template's own raise_exception with the same message, jinja2's and
// Python's errors as an InputError.
std::map<std::string, Tally> check_goldens(const fs::path& dir, const fs::path& goldens) {
  const jinja::Value doc = jinja::parse_json(read_text_file(goldens, "a golden file", kMaxJsonFileBytes), goldens.string());
  const jinja::Value& conversations = field(doc, "conversations");
  jinja::RenderOptions options;
  options.now_epoch_seconds = epoch_of(field(doc, "date").text);
  options.now_is_utc = true;
  std::map<std::string, std::unique_ptr<ChatTemplate>> templates;
  std::map<std::string, Tally> tally;
  for (const auto& c : *field(doc, "cases").list) {
    const std::string name = field(c, "template").text;
    auto& tmpl = templates[name];
    auto& t = tally[name];
    if (!tmpl) {
      try {
        tmpl = std::make_unique<ChatTemplate>(read_text_file(dir / name, "a chat template", 1 << 20), name);
      } catch (const InputError& e) {
        FAIL_CHECK(e.what());
      }
    }
    if (!tmpl) {
      ++t.cases;
      ++t.failed;
      continue;
    }
    const jinja::Value& conv = field(conversations, field(c, "conversation").text.c_str());
    ChatInput input;
    input.messages = field(conv, "messages");
    input.tools = field(conv, "tools");
    input.add_generation_prompt = field(c, "add_generation_prompt").boolean;
    input.extra = *field(c, "variables").dict;
    INFO(name << " / " << field(c, "conversation").text << " / add_generation_prompt "
              << input.add_generation_prompt << " / " << jinja::to_json(field(c, "variables")));
    ++t.cases;
    bool ok = false;
    if (const jinja::Value* text = c.dict->find("text")) {
      std::string got;
      try {
        got = tmpl->render(input, options);
      } catch (const std::exception& e) {
        got = std::string("<error> ") + e.what();
      }
      ok = got == text->text;
      if (!ok) {
        // Where the two first part, for a readable failure.
        std::size_t at = 0;
        while (at < got.size() && at < text->text.size() && got[at] == text->text[at]) ++at;
        const std::size_t from = at > 40 ? at - 40 : 0;
        INFO("first difference at byte " << at << ": zoo '" << got.substr(from, 80) << "' transformers '"
                                         << text->text.substr(from, 80) << "'");
        CHECK(got == text->text);
      }
    } else {
      const jinja::Value& error = field(c, "error");
      const std::string type = field(error, "type").text, message = field(error, "message").text;
      INFO("transformers raised " << type << ": " << message);
      std::string got = "rendered without an error";
      try {
        tmpl->render(input, options);
      } catch (const jinja::TemplateRaised& e) {
        got = "raise: " + e.message();
      } catch (const InputError& e) {
        got = std::string("error: ") + e.what();
      }
      if (type == "raise") {
        ok = got == "raise: " + message;
        CHECK(got == "raise: " + message);
      } else {
        ok = got.rfind("error: " + name + ":", 0) == 0;
        CHECK_THAT(got, Catch::StartsWith("error: " + name + ":"));
      }
    }
    if (!ok) ++t.failed;
  }
  return tally;
}

void report(const std::map<std::string, Tally>& tally) {
  for (const auto& [name, t] : tally)
    std::printf("chat template goldens: %-55s %4d cases, %4d byte-equal or raised alike, %d differ\n", name.c_str(),
                t.cases, t.cases - t.failed, t.failed);
}

}  // namespace

TEST_CASE("chat templates of our own render byte for byte as transformers does", "[chat]") {
  const fs::path chat = fs::path(ZOO_SOURCE_DIR) / "tests/fixtures/chat";
  const auto tally = check_goldens(chat / "templates", chat / "goldens.json");
  REQUIRE(tally.size() >= 4);
  int cases = 0;
  for (const auto& [name, t] : tally) cases += t.cases;
  CHECK(cases >= 400);
}

TEST_CASE("one-line templates render and fail as transformers does", "[chat]") {
  // snippets.json: each line of snippets.txt rendered alone by transformers, or the error it raised.
  const fs::path file = fs::path(ZOO_SOURCE_DIR) / "tests/fixtures/chat/snippets.json";
  const jinja::Value doc = jinja::parse_json(read_text_file(file, "a golden file", kMaxJsonFileBytes), file.string());
  jinja::RenderOptions options;
  options.now_epoch_seconds = epoch_of(field(doc, "date").text);
  options.now_is_utc = true;
  int n = 0;
  for (const auto& c : *field(doc, "cases").list) {
    ++n;
    const std::string source = field(c, "template").text;
    INFO("template: " << source);
    std::string got;
    try {
      const ChatTemplate tmpl(source, "snippet.jinja");
      got = "text: " + tmpl.render(ChatInput{}, options);
    } catch (const jinja::TemplateRaised& e) {
      got = "raise: " + e.message();
    } catch (const InputError& e) {
      got = std::string("error: ") + e.what();
    }
    if (const jinja::Value* text = c.dict->find("text")) {
      CHECK(got == "text: " + text->text);
    } else {
      const jinja::Value& error = field(c, "error");
      INFO("transformers raised " << field(error, "type").text << ": " << field(error, "message").text);
      if (field(error, "type").text == "raise")
        CHECK(got == "raise: " + field(error, "message").text);
      else
        CHECK_THAT(got, Catch::StartsWith("error: snippet.jinja:"));
    }
  }
  CHECK(n >= 100);
}

TEST_CASE("real public chat templates render byte for byte as transformers does", "[chat]") {
  // The public templates are not in the repository: ZOO_REAL_TEMPLATES names a directory holding
  // them and the goldens.json made there by tools/golden/make_chat_template_goldens.py --real DIR.
  const char* dir = std::getenv("ZOO_REAL_TEMPLATES");
  if (!dir || !*dir) ZOO_SKIP("ZOO_REAL_TEMPLATES is not set (a directory of real templates and their goldens.json)");
  const auto tally = check_goldens(dir, fs::path(dir) / "goldens.json");
  report(tally);
  CHECK(!tally.empty());
}
