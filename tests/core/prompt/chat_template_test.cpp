/// The Jinja subset's behaviour on small templates (whitespace control, scoping, Python value
/// semantics, errors). Byte-for-byte parity with Jinja2 on real chat templates is checked by
/// tests/integration/chat_template_golden.py against python3-jinja2.

#include "core/prompt/chat_template.hpp"

#include <gtest/gtest.h>

#include "core/prompt/jinja/template.hpp"

namespace kvr::jinja {
namespace {

std::string render(std::string_view source, const dict& context = {}) {
  auto compiled = compiled_template::parse(source);
  if (!compiled) return "PARSE ERROR: " + compiled.error();
  auto out = compiled->render(context);
  return out ? *out : "RENDER ERROR: " + out.error();
}

TEST(JinjaTemplate, TrimBlocksDropsTheNewlineAfterABlockTagAndLstripDropsItsIndentation) {
  EXPECT_EQ(render("{% if true %}\n  a\n  {% endif %}\nb"), "  a\nb");
  EXPECT_EQ(render("  {%+ if true %}x{% endif %}"), "  x");
  EXPECT_EQ(render("{% if true +%}\nx{% endif %}"), "\nx");
}

TEST(JinjaTemplate, MinusModifiersStripAllWhitespaceOnTheirSide) {
  EXPECT_EQ(render("a  \n {{- 'b' -}} \n c"), "abc");
  EXPECT_EQ(render("{%- for x in [1, 2] %}\n  {{- x }}\n{%- endfor %}"), "12");
}

TEST(JinjaTemplate, OneTrailingNewlineOfTheSourceIsDropped) {
  EXPECT_EQ(render("x\n"), "x");
  EXPECT_EQ(render("x\n\n"), "x\n");
}

TEST(JinjaTemplate, SetInsideALoopDoesNotLeakButNamespaceAttributesDo) {
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}"), "1");
  EXPECT_EQ(render("{% set ns = namespace(x=1) %}{% for i in [1] %}{% set ns.x = 2 %}{% endfor %}{{ ns.x }}"), "2");
  EXPECT_EQ(render("{% if true %}{% set y = 3 %}{% endif %}{{ y }}"), "3");
}

TEST(JinjaTemplate, LoopVariablesFollowJinja) {
  EXPECT_EQ(render("{% for x in 'abc' %}{{ loop.index }}{{ loop.first }}{{ loop.last }}{{ loop.revindex0 }} {% endfor %}"),
            "1TrueFalse2 2FalseFalse1 3FalseTrue0 ");
  EXPECT_EQ(render("{% for x in [1, 2, 3, 4] if x is even %}{{ x }}{% else %}none{% endfor %}"), "24");
  EXPECT_EQ(render("{% for x in [] %}{{ x }}{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in [1, 2, 3] %}{% if x == 2 %}{% break %}{% endif %}{{ x }}{% endfor %}"), "1");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}"), "a=1;b=2;");
}

TEST(JinjaTemplate, ValuesPrintAsPythonPrintsThem) {
  EXPECT_EQ(render("{{ none }} {{ true }} {{ 1.0 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 / 2 }} {{ [1, 'a'] }} {{ {'k': none} }}"),
            "None True 1.0 3 -4 3.5 [1, 'a'] {'k': None}");
  EXPECT_EQ(render("{{ undefined_name }}|{{ 'x' ~ 1 ~ none }}"), "|x1None");
  EXPECT_EQ(render("{{ \"it's\" }} {{ ['it\\'s'] }}"), "it's [\"it's\"]");
}

TEST(JinjaTemplate, StringMethodsSlicingAndFiltersFollowPython) {
  EXPECT_EQ(render("{{ 'a</think>b'.split('</think>')[-1] }}"), "b");
  EXPECT_EQ(render("{{ '\\n\\nhi\\n'.lstrip('\\n') }}|{{ '  x '.strip() }}|{{ 'héllo'[1:3] }}|{{ [1, 2, 3][::-1] }}"),
            "hi\n|x|él|[3, 2, 1]");
  EXPECT_EQ(render("{{ 'Hello' | upper }} {{ ' t ' | trim }} {{ ['a', 'b'] | join(', ') }} {{ 'aXa' | replace('a', 'b') }}"),
            "HELLO t a, b bXb");
  EXPECT_EQ(render("{{ x | default('d') }} {{ '' | default('d', true) }} {{ 'héllo' | length }}"), "d d 5");
  EXPECT_EQ(render("{{ {'b': [1, 2.5, 'é'], 'a': {'c': none}} | tojson }}"), "{\"b\": [1, 2.5, \"é\"], \"a\": {\"c\": null}}");
  EXPECT_EQ(render("{{ {'a': [1]} | tojson(indent=2) }}"), "{\n  \"a\": [\n    1\n  ]\n}");
}

TEST(JinjaTemplate, TestsAndOperatorsFollowJinja) {
  EXPECT_EQ(render("{{ x is defined }} {{ none is none }} {{ 'a' is string }} {{ false is false }} {{ 0 is false }}"),
            "False True True True False");
  EXPECT_EQ(render("{{ 'b' in 'abc' }} {{ 2 not in [1, 2] }} {{ 'k' in {'k': 1} }} {{ not (1 < 2 and 2 <= 2) }}"),
            "True False True False");
  EXPECT_EQ(render("{{ 'yes' if [] else 'no' }} {{ [] or 'fallback' }} {{ messages | length - 1 }}",
                   [] {
                     dict d;
                     d.set("messages", value(list{value(1), value(2)}));
                     return d;
                   }()),
            "no fallback 1");
}

TEST(JinjaTemplate, RaiseExceptionAndUndefinedUsesAreRenderErrorsWithTheirLine) {
  EXPECT_EQ(render("a\n{{ raise_exception('roles must alternate') }}"), "RENDER ERROR: line 2: roles must alternate");
  EXPECT_EQ(render("{{ missing.field }}"), "RENDER ERROR: line 1: 'missing' is undefined");
  EXPECT_EQ(render("{{ 1 + 'a' }}"), "RENDER ERROR: line 1: unsupported operand types for +: 'int' and 'str'");
}

TEST(JinjaTemplate, WhatATemplateBuildsIsBoundedBeforeItIsBuiltWhateverTheRequestDrivesItWith) {
  // A repeat count, a doubling loop or an empty `replace` driven by the request would ask for
  // any amount of memory and time; each is refused before it is built.
  dict context;
  context.set("n", value(std::int64_t{1} << 40));
  context.set("text", value(std::string(1u << 20, 'a')));
  EXPECT_EQ(render("{{ 'ab' * n }}", context),
            "RENDER ERROR: line 1: a string of 2199023255552 bytes would exceed the 64 MiB a template may build");
  EXPECT_EQ(render("{{ (n * [1, 2]) | length }}", context),
            "RENDER ERROR: line 1: a list of 2199023255552 items would exceed the 4194304 a template may build");
  EXPECT_EQ(render("{{ ('' * n) | length }}{{ ([] * n) | length }}{{ ('ab' * -3) | length }}", context), "000");
  EXPECT_EQ(render("{% set ns = namespace(s=text) %}{% for i in range(10) %}{% set ns.s = ns.s + ns.s %}{% endfor %}"
                   "{{ ns.s | length }}",
                   context),
            "RENDER ERROR: line 1: a string of 134217728 bytes would exceed the 64 MiB a template may build");
  EXPECT_EQ(render("{{ text.replace('', text) | length }}", context).substr(0, 30), "RENDER ERROR: line 1: a string");
  EXPECT_EQ(render("{{ range(-9223372036854775807, 9223372036854775807) | length }}"),
            "RENDER ERROR: line 1: range() too long");
  EXPECT_EQ(render("{{ ('ab' * 3) ~ ([0] * 2) | length }}"), "ababab2");
}

TEST(JinjaTemplate, ConstructsOutsideTheSubsetAreRefusedAtLoadWithNameAndLine) {
  EXPECT_EQ(render("ok\n{% macro greet(x) %}hi{% endmacro %}"), "PARSE ERROR: line 2: unsupported construct '{% macro %}'");
  EXPECT_EQ(render("{{ x | wordwrap }}"), "PARSE ERROR: line 1: unsupported filter 'wordwrap'");
  EXPECT_EQ(render("\n\n{% if x %}"), "PARSE ERROR: line 3: unexpected end of template, expected 'endif'");
  EXPECT_EQ(render("{{ x is prime }}"), "PARSE ERROR: line 1: unsupported test 'prime'");
  EXPECT_EQ(render("{{ 'open }}"), "PARSE ERROR: line 1: unclosed {{ tag");
}

}  // namespace
}  // namespace kvr::jinja

namespace kvr {
namespace {

TEST(ChatTemplate, RendersTheSpecialTokensAndStringContentAsVllmPassesThem) {
  auto chat = chat_template::from_tokenizer_config(
      R"({"bos_token": {"content": "<s>"}, "eos_token": "</s>",
          "chat_template": "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}"})");
  ASSERT_TRUE(chat) << chat.error();
  const std::string messages =
      R"([{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "x"}}, {"type": "text", "text": "b"}]},
          {"role": "assistant", "content": null}])";
  auto rendered = chat->render({.messages_json = messages});
  ASSERT_TRUE(rendered) << rendered.error().message;
  EXPECT_EQ(*rendered, "<s>[user]a\nb[assistant][assistant]");
  EXPECT_EQ(*chat->render({.messages_json = messages, .add_generation_prompt = false}), "<s>[user]a\nb[assistant]");
}

TEST(ChatTemplate, PlainConcatenationIsTheDocumentedFallback) {
  auto plain = chat_template::render_plain({.messages_json = R"([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}])"});
  ASSERT_TRUE(plain);
  EXPECT_EQ(*plain, "system: s\nuser: u\nassistant: ");
}

TEST(ChatTemplate, AConfigWithoutATemplateOrWithABrokenOneIsRefusedClearly) {
  EXPECT_EQ(chat_template::from_tokenizer_config(R"({"eos_token": "x"})").error(), "tokenizer_config.json has no chat_template");
  EXPECT_EQ(chat_template::from_tokenizer_config(R"({"chat_template": "{% for m in messages %}"})").error(),
            "chat template line 1: unexpected end of template, expected 'endfor'");
  auto chat = chat_template::from_source("{{ messages[0].content }}");
  ASSERT_TRUE(chat);
  EXPECT_EQ(chat->render({.messages_json = "[{"}).error().message, "messages is not valid JSON");
}

}  // namespace
}  // namespace kvr
