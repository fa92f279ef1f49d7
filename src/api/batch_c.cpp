// C ABI: batched forward over sessions (geist_batch.h).
#include <string>
#include <vector>

#include "api/handles.h"
#include "engine/batch.h"
#include "geist/geist_batch.h"

using geist::Status;
using geist::api::guarded;

extern "C" {

void geist_batch_item_init(geist_batch_item* item, geist_session* session,
                           const geist_token* tokens, size_t n_tokens) {
  if (item == nullptr) return;
  item->struct_size = sizeof(geist_batch_item);
  item->session = session;
  item->tokens = tokens;
  item->n_tokens = n_tokens;
  item->status = GEIST_OK;
  item->decode = 0;
  item->token = 0;
}

geist_status geist_batch_forward(geist_model* model, geist_batch_item* items, size_t n_items) {
  if (model == nullptr || !model->model) return GEIST_E_INVALID_ARG;
  return guarded(
      [&]() -> Status {
        if (items == nullptr && n_items > 0) {
          return Status(GEIST_E_INVALID_ARG, "geist_batch_forward: items is NULL");
        }
        std::vector<geist::BatchItem> b(n_items);
        // The stride of the array is the caller's sizeof(geist_batch_item): check item 0
        // before reading any other, then every item (a mirror that set only the first).
        for (size_t i = 0; i < n_items; ++i) {
          if (items[i].struct_size != sizeof(geist_batch_item)) {
            return Status::error(GEIST_E_INVALID_ARG,
                                 "geist_batch_forward: item %zu has struct_size %u, expected %zu "
                                 "(initialise items with geist_batch_item_init)",
                                 i, items[i].struct_size, sizeof(geist_batch_item));
          }
        }
        for (size_t i = 0; i < n_items; ++i) {
          geist_session* s = items[i].session;
          if (s == nullptr || !s->session || s->owner != model) {
            return Status::error(GEIST_E_INVALID_ARG,
                                 "geist_batch_forward: item %zu has no session of this model", i);
          }
          b[i].session = s->session.get();
          b[i].tokens = items[i].tokens;
          b[i].n = items[i].n_tokens;
          b[i].decode = items[i].decode != 0;
        }
        GEIST_RETURN_IF_ERROR(geist::forward_batch(*model->model, b.data(), b.size()));
        for (size_t i = 0; i < n_items; ++i) {
          items[i].status = b[i].status.code();
          if (b[i].decode && b[i].status) items[i].token = b[i].token;
          if (!b[i].status) items[i].session->set_error(b[i].status.message());
        }
        return Status::ok();
      },
      [model](const std::string& m) { model->set_error(m); });
}

}  // extern "C"
