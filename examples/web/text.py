"""The page's words in English and Chinese, and how a request picks one.

The server answers in the language of the browser (its Accept-Language
header, which follows the browser's own language setting); the page gets the
strings it needs for its own drawing (button titles, the offline banner)
inside the HTML, so the two never disagree.
"""

from __future__ import annotations

LANGUAGES = ("en", "zh")

# Strings the server puts into the page or its answers. {name} fields are
# filled by str.format.
SERVER = {
    "en": {
        "title": "Sign in · Tickgate shop",
        "brand": "Tickgate shop",
        "orders": "My orders",
        "logout": "Log out",
        "heading": "Sign in",
        "prompt": "Log in to open My orders.",
        "phone": "Phone number",
        "phone_hint": "With the country code, e.g. +8613800000000",
        "code": "Code",
        "code_hint": "The 6 digits of the text message",
        "get_code": "Get code",
        "login": "Log in",
        "signed_in": "Signed in",
        "orders_heading": "My orders",
        "activity": "What the server told this page",
        "refused_heading": "What was refused and why",
        "reason": "Reason",
        "count": "Times",
        "records_heading": "The guard's last decisions (every server)",
        "when": "When", "number": "Number", "country": "Country", "address": "Address",
        "outcome": "Outcome", "why": "Warnings or rule",
        "server": "server {name} (port {port})",
        "bad_phone": "Enter a phone number as +<country><number>, e.g. +8613800000000.",
        "cooling": "A code was sent; wait {seconds} s.",
        "in_flight": "A code is being sent.",
        "address_budget": "Too many codes from your address.",
        "destination_refused": "Codes are not sent to this country or number range.",
        "pumping_suspected": "Too many codes that nobody used: try again later.",
        "global_budget": "The service sends too many codes right now.",
        "number_budget": "Too many codes for this number.",
        "send_failed": "The code could not be sent. Try again.",
        "code_sent": "Code sent.",
        "reload": "Reload the page (it sets the session cookie).",
        "enter_phone": "Enter your phone number.",
        "six_digits": "The code has 6 digits.",
        "get_first": "Get a code first.",
        "wrong": "Wrong code.",
        "dead": "Too many wrong codes: get a new code.",
        "wrong_left": "Wrong code: {left} tries left.",
        "wrong_left_1": "Wrong code: 1 try left.",
        "logged_in": "Logged in as {phone}.",
        "logged_out": "Logged out.",
        "unavailable": "The service is unavailable right now. Try again in a moment.",
        "challenge": "Checking you are not a robot…",
        "challenge_failed": "The check that you are not a robot failed. Tap again.",
        "challenge_expired": "The check that you are not a robot took too long. Tap again.",
        "challenge_used": "That check was used already. Tap again.",
    },
    "zh": {
        "title": "登录 · Tickgate 商店",
        "brand": "Tickgate 商店",
        "orders": "我的订单",
        "logout": "退出登录",
        "heading": "登录",
        "prompt": "登录后打开“我的订单”。",
        "phone": "手机号",
        "phone_hint": "带国家代码，例如 +8613800000000",
        "code": "验证码",
        "code_hint": "短信中的 6 位数字",
        "get_code": "获取验证码",
        "login": "登录",
        "signed_in": "已登录",
        "orders_heading": "我的订单",
        "activity": "服务器告诉本页的事",
        "refused_heading": "拒绝了什么，为什么",
        "reason": "原因",
        "count": "次数",
        "records_heading": "防护最近的决定（所有服务器）",
        "when": "时间", "number": "号码", "country": "国家", "address": "网络地址",
        "outcome": "结果", "why": "警告或规则",
        "server": "服务器 {name}（端口 {port}）",
        "bad_phone": "请按 +<国家代码><号码> 输入手机号，例如 +8613800000000。",
        "cooling": "验证码已发送，请等 {seconds} 秒。",
        "in_flight": "验证码正在发送。",
        "address_budget": "你的网络地址获取验证码的次数太多。",
        "destination_refused": "不向这个国家或号段发送验证码。",
        "pumping_suspected": "太多验证码没有被使用，请稍后再试。",
        "global_budget": "服务当前发送的验证码太多。",
        "number_budget": "这个号码获取验证码的次数太多。",
        "send_failed": "验证码未能发出，请重试。",
        "code_sent": "验证码已发送。",
        "reload": "请刷新页面（它会设置会话 cookie）。",
        "enter_phone": "请输入手机号。",
        "six_digits": "验证码是 6 位数字。",
        "get_first": "请先获取验证码。",
        "wrong": "验证码错误。",
        "dead": "错误次数太多：请重新获取验证码。",
        "wrong_left": "验证码错误：还可以再试 {left} 次。",
        "wrong_left_1": "验证码错误：还可以再试 1 次。",
        "logged_in": "已登录：{phone}。",
        "logged_out": "已退出登录。",
        "unavailable": "服务暂时不可用，请稍后再试。",
        "challenge": "正在确认你不是机器人…",
        "challenge_failed": "人机验证未通过，请再点一次。",
        "challenge_expired": "人机验证超时，请再点一次。",
        "challenge_used": "这次人机验证已经用过，请再点一次。",
    },
}

# Strings the page's script draws with ({s}: seconds, {m}: minutes, ...).
PAGE = {
    "en": {
        "IDLE": "Get code", "SENDING": "Sending…", "COOLING": "Resend ({s}s)",
        "READY_AGAIN": "Resend code", "LOCKED": "Try again in {m} min", "CODE_DEAD": "Get a new code",
        "counting": "You can ask for another code in {s} seconds.",
        "ready": "You can ask for a code now.",
        "locked": "No more codes for this number for {m} min.",
        "frees": "The next one is free at {at} (in {m} min).",
        "offline": "Offline: the service cannot be reached. This page comes back by itself.",
        "reconnecting": "Reconnecting to the server…",
        "signed_in_as": "Signed in as {phone}.",
        "orders_of": "Orders of {user}",
        "answered": "The server answered {status}.",
        "refusals_none": "Nothing refused yet.",
        "records_none": "No decision recorded yet.",
        "granted": "sent", "refused": "refused", "challenged": "challenged", "passed": "sent, passed",
        # A code's outcome, recorded once known (docs/pumping.md, "What became of each code").
        "verified": "code verified", "replaced": "code replaced by a resend", "killed": "code killed by wrong codes",
        "never_verified": "code never verified", "challenge_passed": "challenge passed",
        "checking": "Checking you are not a robot…",
        "check_again": "The check did not go through. Tap again.",
        "refusals_summary": "Server {server} since it started: sent {granted}, refused {refused} "
                            "({local} of them without asking Redis).",
        "reasons": {
            "cooling_down": "Cooling down: a code was sent to the number just before",
            "in_flight": "A code to the number was being sent (a double tap)",
            "locked": "A budget spent (the address's or all codes'), or the number's own cap",
            "store_io": "Redis out of reach: refused rather than sent unchecked",
            "store_unknown": "Redis did not answer in time",
            "invalid_number": "Not a phone number",
            "destination_refused": "A country or prefix that gets no codes",
            "pumping_suspected": "SMS pumping suspected",
            "unverified_by_country_daily": "Many unverified codes to the country today",
            "unverified_by_country_hourly": "Many unverified codes to the country this hour",
            "unverified_by_address_daily": "Many unverified codes from the address today",
            "unverified_by_address_hourly": "Many unverified codes from the address this hour",
            "countries_by_address_daily": "Many countries from one address today",
            "unverified_by_range_daily": "Many unverified codes to the number's range today",
            "unverified_by_range_hourly": "Many unverified codes to the number's range this hour",
            "challenge_required": "A challenge asked instead (a proof of work for the browser)",
            "challenge_refused": "Challenge answers refused: wrong, forged, expired or used",
            "code_dead": "Logins refused: the code died of wrong codes",
        },
    },
    "zh": {
        "IDLE": "获取验证码", "SENDING": "发送中…", "COOLING": "重新发送({s}s)",
        "READY_AGAIN": "重新获取", "LOCKED": "请{m}分钟后再试", "CODE_DEAD": "重新获取验证码",
        "counting": "{s} 秒后可以再次获取验证码。",
        "ready": "现在可以获取验证码。",
        "locked": "这个号码 {m} 分钟内不能再获取验证码。",
        "frees": "下一次可在 {at}（{m} 分钟后）获取。",
        "offline": "离线：无法连接服务。恢复后本页会自动更新。",
        "reconnecting": "正在重新连接服务器…",
        "signed_in_as": "已登录：{phone}。",
        "orders_of": "{user} 的订单",
        "answered": "服务器返回 {status}。",
        "refusals_none": "还没有拒绝过。",
        "records_none": "还没有记录。",
        "granted": "已发送", "refused": "已拒绝", "challenged": "需验证", "passed": "验证后发送",
        "verified": "验证码已验证", "replaced": "验证码被重发取代", "killed": "验证码因输错作废",
        "never_verified": "验证码未被验证", "challenge_passed": "已通过人机验证",
        "checking": "正在确认你不是机器人…",
        "check_again": "人机验证没有完成，请再点一次。",
        "refusals_summary": "服务器 {server} 启动以来：发送 {granted} 条验证码，拒绝 {refused} 次"
                            "（其中 {local} 次无需询问 Redis）。",
        "reasons": {
            "cooling_down": "冷却中：刚给这个号码发过验证码",
            "in_flight": "这个号码的验证码正在发送（重复点击）",
            "locked": "额度用完（网络地址的或全部验证码的），或号码自身的上限",
            "store_io": "无法连接 Redis：拒绝而不是不经检查就发送",
            "store_unknown": "Redis 没有及时回答",
            "invalid_number": "不是手机号",
            "destination_refused": "不向这个国家或号段发送验证码",
            "pumping_suspected": "疑似短信轰炸（SMS pumping）",
            "unverified_by_country_daily": "今天发往该国家的未验证验证码过多",
            "unverified_by_country_hourly": "这一小时发往该国家的未验证验证码过多",
            "unverified_by_address_daily": "今天来自该网络地址的未验证验证码过多",
            "unverified_by_address_hourly": "这一小时来自该网络地址的未验证验证码过多",
            "countries_by_address_daily": "今天一个网络地址请求了过多国家",
            "unverified_by_range_daily": "今天发往该号段的未验证验证码过多",
            "unverified_by_range_hourly": "这一小时发往该号段的未验证验证码过多",
            "challenge_required": "改为要求人机验证（浏览器完成工作量证明）",
            "challenge_refused": "被拒绝的人机验证答案：错误、伪造、过期或已用过",
            "code_dead": "登录被拒：错误次数太多，验证码已失效",
        },
    },
}


def language(accept_language: str) -> str:
    """'zh' or 'en': the first of the two the browser lists, by its weights
    (Accept-Language: zh-CN,zh;q=0.9,en;q=0.8 -> 'zh'); English by default."""
    ranked = []
    for position, part in enumerate(accept_language.split(",")):
        tag, _, params = part.strip().partition(";")
        weight = 1.0
        if params.strip().startswith("q="):
            try:
                weight = float(params.strip()[2:])
            except ValueError:
                continue
        primary = tag.strip().lower().split("-")[0]
        if primary in LANGUAGES and weight > 0:
            ranked.append((-weight, position, primary))
    return min(ranked)[2] if ranked else "en"
