//! LLM providers over reqwest: OpenAI-compatible chat completions, Anthropic Messages, Gemini.

mod types;

pub use types::{
    ChatMessage, ChatRequest, ChatResponse, FinishReason, ImageInput, Role, StreamDelta, ToolCall,
    ToolSpec, Usage,
};
