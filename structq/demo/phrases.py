"""Sentence templates for weekly reports, and the words that fill them.

Templates use ``str.format`` fields; :mod:`.reports` fills only the fields a template names.
Engineering and business people write differently: engineers talk about projects, modules
and technologies, sales and marketing people about customers, products and money. The
mixture keeps full-text search meaningful ("Kafka", "灰度发布", a customer's name, a project).
"""

from __future__ import annotations

#: Departments whose people write weekly reports, and how likely they are to file one a week.
REPORTING_RATE = {
    "研发部": 0.28, "产品部": 0.25, "运维部": 0.22,
    "销售部": 0.10, "市场部": 0.11, "客户成功部": 0.12,
}
ENGINEERING = frozenset({"研发部", "产品部", "运维部"})

#: What engineers who are on no project that week write about instead.
WORKSTREAMS = ("基础平台", "内部工具", "技术中台", "运维平台", "研发效能平台")

MODULES = (
    "用户中心", "订单服务", "数据同步", "报表引擎", "权限管理", "消息推送", "支付网关", "调度系统",
    "搜索服务", "推荐引擎", "日志平台", "配置中心", "数据采集", "接口网关", "指标计算", "文件服务",
)

#: Technologies anyone may mention; a project's own keywords are mentioned more often.
TECH_TERMS = (
    "Kubernetes", "Kafka", "Redis", "MySQL", "PostgreSQL", "Elasticsearch", "微服务", "灰度发布",
    "压测", "CI/CD", "链路追踪", "监控告警", "缓存", "消息队列", "容器化", "单元测试", "慢查询",
    "接口联调", "代码评审", "大模型",
)

TASKS = ("开发", "联调", "重构", "性能优化", "代码评审", "上线部署", "技术方案设计", "缺陷修复")
TEAMS = ("前端组", "后端组", "测试组", "数据组", "运维组", "算法组")
QUARTERS = ("本季度", "下季度", "下月", "年底前")

TITLES = (
    "{author}的周报（{week_start}～{week_end}）",
    "{project}项目周报（{week_start}）- {author}",
    "{department}周报 | 第{week_number}周 | {author}",
    "{author} 本周工作总结（{week_start}）",
)

ENGINEERING_PROGRESS = (
    "完成{project}项目{module}模块的{task}，已提交测试。",
    "{project}项目{term}方案评审通过，已输出设计文档。",
    "修复{project}线上问题{n}个，主要集中在{module}。",
    "与{team}联调{module}接口，{project}整体进度约{percent}%。",
    "{project}项目{module}完成{term}改造，响应时间下降{percent}%。",
    "参与{project}迭代评审，梳理{module}需求{n}条。",
    "为{module}补充单元测试，覆盖率提升至{percent}%。",
    "{project}项目完成第{small}轮{term}相关测试，发现缺陷{n}个，已全部跟进。",
    "排查{project}{module}的{term}告警，定位到配置问题并修复。",
)
ENGINEERING_RISKS = (
    "{term}相关资源紧张，可能影响{project}的上线节奏。",
    "第三方接口文档不完整，{module}联调进度滞后约{small}天。",
    "测试环境不稳定，{project}回归测试受阻，已协调运维处理。",
    "{project}需求变更较多，需要与产品确认本期范围。",
    "人手紧张，{module}开发可能延期一周。",
    "{term}版本升级存在兼容性风险，正在评估回滚方案。",
    "暂无明显风险。",
)
ENGINEERING_PLANS = (
    "推进{project}项目{module}模块{task}。",
    "完成{term}方案的技术验证并在组内分享。",
    "配合测试完成{project}回归测试，准备灰度发布。",
    "整理{project}项目文档，沉淀{term}最佳实践。",
    "跟进{module}线上监控指标，优化慢查询。",
    "与{team}对齐{project}下一迭代排期。",
)

BUSINESS_PROGRESS = (
    "拜访{customer}，沟通{product}采购需求，客户预计{quarter}签约。",
    "跟进{customer}合同回款，本周到账{amount}万元。",
    "参加{city}行业峰会，收集销售线索{n}条。",
    "为{customer}完成{product}产品演示，客户反馈积极。",
    "协助{customer}完成{product}上线验收。",
    "组织{product}线上直播活动，报名{n}人。",
    "处理{customer}工单{small}个，客户满意度{percent}%。",
    "完成{customer}的{product}报价方案，金额约{amount}万元。",
)
BUSINESS_RISKS = (
    "{customer}预算审批流程较长，签约时间可能推迟。",
    "竞品在{city}地区降价，{product}报价压力较大。",
    "{customer}回款进度慢于预期，需要加强跟进。",
    "{customer}对{product}的交付周期有顾虑，需研发支持评估。",
    "暂无明显风险。",
)
BUSINESS_PLANS = (
    "继续跟进{customer}的{product}商机。",
    "准备{customer}的投标材料，下周提交。",
    "拜访{city}地区重点客户{small}家。",
    "推进{product}在{industry}行业的解决方案推广。",
    "与{customer}确认{product}的实施排期。",
)
