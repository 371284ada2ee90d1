// Parameter groups for freezing (retro-fitting, RETRO paper §4.2): every tensor of the layout belongs to one of
//   cca      the decoder's chunked-cross-attention blocks with their norms (decoder.layers.I.1.*),
//   encoder  the retrieval encoder with its norms, cross-attention and project_out (encoder.*),
//   copy     the copy head (copy_head.*, config copy_head, nn/copy_head.h; --retrieval-lr-scale leaves it at 1x),
//   decoder  everything else: token and position embeddings, to_decoder_model_dim, the decoder's
//            self-attention and feed-forward blocks and norms, decoder.norm_out and the output head.
// The token embedding is in `decoder` although the encoder reads neighbours through it too (RETRO-pytorch
// shares one table): freezing `decoder` then keeps the no-retrieval model bit-identical to its base.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/params.h"

namespace retro {

enum class ParamGroup { DECODER, CCA, ENCODER, COPY };

ParamGroup param_group(const std::string& tensor_name);
const char* param_group_name(ParamGroup g);
std::vector<std::string> param_group_names();   // cca, encoder, copy, decoder: the valid names, in canonical order
std::string param_group_list();                 // "cca, encoder, copy, decoder", for messages and --help

// Parses a comma list of group names ("cca,encoder"); an unknown or empty name is a UserError in `where`
// listing the valid ones. Returns the groups in canonical order (cca, encoder, copy, decoder), each once.
std::vector<ParamGroup> param_groups_parse(const std::string& list, const std::string& where);
std::string param_groups_string(const std::vector<ParamGroup>& groups);   // canonical "cca,encoder"

// The backward block of a tensor, for skipping work that feeds only frozen tensors (model/retro.h,
// model/backend_model.h): 0 = embeddings and to_decoder_model_dim; decoder layer i: 3i+1 self-attention,
// 3i+2 CCA (encoder tensors belong to the first CCA layer's block; INT64_MAX without CCA layers), 3i+3
// feed-forward; 3*dec_depth+1 = decoder.norm_out and the head.
std::int64_t param_backward_block(const std::string& tensor_name, const RetroConfig& config);

// What backward may skip when only some tensors train (RetroModel::set_trainable, BackendRetroModel::set_trainable):
// the lowest trainable block (param_backward_block), whether the output head's weight and the encoder train.
struct BackwardSkips {
    std::int64_t lowest_trainable = 0;
    bool head_trainable = true, encoder_trainable = true;
};
// `per_entry`: one flag per layout entry (InternalError when the count differs).
BackwardSkips param_backward_skips(const ParamLayout& layout, const RetroConfig& config,
                                   const std::vector<std::uint8_t>& per_entry);

// Per layout entry: 1 when its group is in `groups`.
std::vector<std::uint8_t> param_trainable(const ParamLayout& layout, const std::vector<ParamGroup>& groups);

}  // namespace retro
