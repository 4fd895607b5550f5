#include "core/common/multipart.hpp"

#include <gtest/gtest.h>

namespace kvr {
namespace {

constexpr std::string_view upload =
    "--XyZ\r\n"
    "Content-Disposition: form-data; name=\"file\"; filename=\"a;b.wav\"\r\n"
    "Content-Type: audio/wav\r\n\r\n"
    "RIFF\r\n--Xy not the boundary\r\n"
    "--XyZ\r\n"
    "content-disposition: form-data; name=model\r\n\r\n"
    "whisper-large\r\n"
    "--XyZ\r\n"
    "Content-Disposition: form-data; name=\"empty\"\r\n\r\n"
    "\r\n"
    "--XyZ--\r\n";

TEST(multipart, finds_a_field_after_a_binary_part_and_an_empty_one) {
  EXPECT_EQ(multipart_field(upload, "XyZ", "model"), "whisper-large");
  EXPECT_EQ(multipart_field(upload, "XyZ", "file"), "RIFF\r\n--Xy not the boundary");
  EXPECT_EQ(multipart_field(upload, "XyZ", "empty"), "");
  EXPECT_FALSE(multipart_field(upload, "XyZ", "language"));
  EXPECT_FALSE(multipart_field(upload, "other", "model"));
}

TEST(multipart, reads_the_boundary_of_form_data_content_types_only) {
  EXPECT_EQ(multipart_boundary("multipart/form-data; boundary=XyZ"), "XyZ");
  EXPECT_EQ(multipart_boundary("Multipart/Form-Data;boundary=\"a;b c\""), "a;b c");
  EXPECT_EQ(multipart_boundary("multipart/form-data; charset=utf-8; boundary=----abc"), "----abc");
  EXPECT_FALSE(multipart_boundary("application/json"));
  EXPECT_FALSE(multipart_boundary("multipart/form-data"));
  EXPECT_FALSE(multipart_boundary("multipart/form-data; boundary=" + std::string(71, 'x')));
  EXPECT_FALSE(multipart_boundary("multipart/form-data; boundary=\"unclosed"));
}

TEST(multipart, gives_up_on_bodies_that_are_not_well_formed) {
  EXPECT_FALSE(multipart_field("", "B", "model"));
  EXPECT_FALSE(multipart_field("--B\r\nContent-Disposition: form-data; name=model\r\n\r\nno end", "B", "model"));
  EXPECT_FALSE(multipart_field("--B\r\nContent-Disposition: form-data; name=model", "B", "model"));
  EXPECT_FALSE(multipart_field("--B\r\n" + std::string(9000, 'h') + "\r\n\r\nx\r\n--B--", "B", "model"))
      << "part headers are bounded";
  EXPECT_EQ(multipart_field("preamble\r\n--B\r\nContent-Disposition: form-data; name=model\r\n\r\nm\r\n--B--", "B", "model"), "m");
}

}  // namespace
}  // namespace kvr
