// Reading and writing dataset length traces (plain text and CSV).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "base/errors.hpp"
#include "base/files.hpp"
#include "formats/length_trace.hpp"

namespace lcsim {
namespace length_trace_test {

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

std::vector<Tokens> lengths(const Dataset& dataset) {
  std::vector<Tokens> out;
  for (const auto& s : dataset.sequences()) out.push_back(s.tokens);
  return out;
}

/// The InputError message load_length_trace throws for `text` (nullopt: the file as it is), or "" when it loads.
std::string load_error(const std::string& name, const std::optional<std::string>& text) {
  try {
    load_length_trace(text ? write_file(name, *text) : ::testing::TempDir() + name);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(LengthTraceTest, PlainTextWithCommentsAndBlankLines) {
  const auto path = write_file("lens.txt", "# tokens per sample\n120\n\n  4096 \n# a comment\n7\r\n65536\n");
  const Dataset dataset = load_length_trace(path);
  EXPECT_EQ(dataset.name(), "lens");
  EXPECT_EQ(lengths(dataset), (std::vector<Tokens>{120, 4096, 7, 65536}));
  for (std::size_t i = 0; i < dataset.size(); ++i) EXPECT_EQ(dataset.sequences()[i].id, static_cast<int>(i));
  EXPECT_EQ(dataset.total_tokens(), 120 + 4096 + 7 + 65536);
  EXPECT_EQ(dataset.longest(), 65536);
}

TEST(LengthTraceTest, CsvTakesTheTokensColumn) {
  const auto path = write_file("mix.csv", "source, tokens ,id\nwiki,300,a\n\nchat, 12 ,b\n# skipped\ncode,2048,c\n");
  const Dataset dataset = load_length_trace(path);
  EXPECT_EQ(dataset.name(), "mix");
  EXPECT_EQ(lengths(dataset), (std::vector<Tokens>{300, 12, 2048}));
  EXPECT_EQ(dataset.sequences()[2].id, 2);
  // A one-column CSV works too.
  EXPECT_EQ(lengths(load_length_trace(write_file("one.csv", "tokens\n5\n6\n"))), (std::vector<Tokens>{5, 6}));
  // Comments and blank lines may precede the header; line numbers still count them.
  EXPECT_EQ(lengths(load_length_trace(write_file("late.csv", "# exported\n\ntokens,x\n9,a\n"))),
            (std::vector<Tokens>{9}));
  EXPECT_EQ(load_error("late_bad.csv", "# exported\n\ntokens,x\n9\n"),
            ::testing::TempDir() + "late_bad.csv:4: expected 2 CSV fields (as in the header), got 1");
}

TEST(LengthTraceTest, MalformedLinesNameFileAndLine) {
  const std::string dir = ::testing::TempDir();
  EXPECT_EQ(load_error("bad1.txt", "10\n20\nabc\n"),
            dir + "bad1.txt:3: expected a positive integer token count, got 'abc'");
  EXPECT_EQ(load_error("bad2.txt", "# c\n10\n0\n"), dir + "bad2.txt:3: token count must be positive, got 0");
  EXPECT_EQ(load_error("bad3.txt", "10\n-5\n"), dir + "bad3.txt:2: token count must be positive, got -5");
  EXPECT_EQ(load_error("bad4.txt", "10\n12.5\n"),
            dir + "bad4.txt:2: expected a positive integer token count, got '12.5'");
  EXPECT_EQ(load_error("bad5.txt", "99999999999999999999\n"),
            dir + "bad5.txt:1: token count '99999999999999999999' is out of range");
  EXPECT_EQ(load_error("bad6.txt", "\n0\n"), dir + "bad6.txt:2: token count must be positive, got 0");
  EXPECT_EQ(load_error("bad7.csv", "name,tokens\na,5\nb,6,extra\n"),
            dir + "bad7.csv:3: expected 2 CSV fields (as in the header), got 3");
  EXPECT_EQ(load_error("bad8.csv", "name,tokens\na,5\nb,\n"), dir + "bad8.csv:3: column 'tokens': empty token count");
  EXPECT_EQ(load_error("bad9.csv", "name,tokens\n\"a,b\",5\n"),
            dir + "bad9.csv:2: quoted CSV fields are not supported");
  EXPECT_EQ(load_error("bad10.csv", "name,length\na,5\n"),
            dir +
                "bad10.csv:1: expected a positive integer token count or a CSV header with a 'tokens' column, got "
                "'name,length'");
  EXPECT_EQ(load_error("bad11.csv", "tokens,tokens\n5,5\n"),
            dir + "bad11.csv:1: CSV header names the 'tokens' column twice");
  EXPECT_EQ(load_error("bad12.csv", "id,tokens\n1,x7\n"),
            dir + "bad12.csv:2: column 'tokens': expected a positive integer token count, got 'x7'");
  // Found by the length_trace fuzz target: two counts whose sum overflows 64 bits (undefined behaviour).
  EXPECT_EQ(load_error("bad13.txt", "006632172227690066747\n006632172227690066746\n"),
            dir + "bad13.txt:1: token count 006632172227690066747 is over the limit of 1073741824");
}

TEST(LengthTraceTest, EmptyAndMissingFilesAreErrors) {
  const std::string dir = ::testing::TempDir();
  EXPECT_EQ(load_error("empty.txt", ""), dir + "empty.txt: length trace has no sequences");
  EXPECT_EQ(load_error("comments.txt", "# nothing\n\n"), dir + "comments.txt: length trace has no sequences");
  EXPECT_EQ(load_error("header.csv", "tokens\n"), dir + "header.csv: length trace has no sequences");
  const std::string missing = dir + "no_such_trace.txt";
  try {
    load_length_trace(missing);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), missing + ": cannot open file (No such file or directory)");
  }
}

TEST(LengthTraceTest, AByteOrderMarkIsNotPartOfTheFirstCount) {
  EXPECT_EQ(lengths(load_length_trace(write_file("bom.txt", std::string("\xEF\xBB\xBF") + "7897\n100\n"))),
            (std::vector<Tokens>{7897, 100}));
}

TEST(LengthTraceTest, MessagesQuoteAShortPrintableExcerpt) {
  const std::string dir = ::testing::TempDir();
  // One 1 MB line: the message quotes 80 characters and says how long the line was.
  EXPECT_EQ(load_error("long.txt", "12\n" + std::string(1000001, 'a') + "\n"),
            dir + "long.txt:2: expected a positive integer token count, got '" + std::string(80, 'a') +
                "... (1000001 bytes)'");
  // Binary bytes are escaped, never echoed raw.
  EXPECT_EQ(load_error("binary.txt", std::string("5\n\x7F") + "ELF\x02\x01"),
            dir + "binary.txt:2: expected a positive integer token count, got '\\x7FELF\\x02\\x01'");
}

TEST(LengthTraceTest, ATraceOverTheLimitIsRefusedBeforeReading) {
  const std::string path = write_file("huge.txt", "");
  std::filesystem::resize_file(path, kMaxTraceFileBytes + 1);  // sparse: no disk space is used
  EXPECT_EQ(load_error("huge.txt", std::nullopt),
            path + ": is 268435457 bytes, more than the 256 MiB lcsim reads here (docs/robustness.md)");
  std::filesystem::remove(path);
}

TEST(LengthTraceTest, SaveThenLoadKeepsLengthsAndRenumbers) {
  const Dataset original("sampled", {{100, 5}, {101, 70000}, {102, 1}});
  const std::string path = ::testing::TempDir() + "roundtrip.txt";
  save_length_trace(original, path);
  const Dataset loaded = load_length_trace(path);
  EXPECT_EQ(loaded.name(), "roundtrip");
  EXPECT_EQ(lengths(loaded), (std::vector<Tokens>{5, 70000, 1}));
  EXPECT_EQ(loaded.sequences().front().id, 0);
  std::ifstream in(path);
  std::string first_line;
  std::getline(in, first_line);
  EXPECT_EQ(first_line.front(), '#');
  EXPECT_THROW(save_length_trace(original, ::testing::TempDir() + "no_such_dir/x.txt"), InputError);
}

}  // namespace length_trace_test
}  // namespace lcsim
