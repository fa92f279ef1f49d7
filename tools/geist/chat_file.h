// The file `geist chat` saves with /save: the conversation and session states in one file, so
// a resumed chat continues without prefilling again.
//
// Layout (little-endian): "GEISTCHT" (8 bytes), u32 version (1), u32 n_images, u64 json_len,
// a JSON object [json_len] ({"messages": [...], ...}: what the chat needs back), then n_images
// times: u64 image_len, a session snapshot image [image_len] (docs/SNAPSHOT_FORMAT.md).
// Written to PATH.tmp, then renamed over PATH.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace geist_cli {

bool write_chat_file(const std::string& path, const std::string& json,
                     const std::vector<std::vector<uint8_t>>& images, std::string* err);
// Checks the magic, version and lengths against the file size; the images themselves are
// validated by the restores.
bool read_chat_file(const std::string& path, std::string* json,
                    std::vector<std::vector<uint8_t>>* images, std::string* err);

}  // namespace geist_cli
